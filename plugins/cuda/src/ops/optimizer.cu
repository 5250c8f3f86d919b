// AdamW and the gradient utilities over tensor lists: one launch per tensor, fp64 registers (as the
// reference), and for grad_norm fixed partial sums so the norm is bit-identical from run to run.
#include <cmath>
#include <vector>

#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

constexpr int kNormBlocks = 256;

__device__ bool flag_set(const float* flag) {
  return flag != nullptr && *flag != 0.0f;
}

// One block's share of sum |x|^p (or max |x| when p is infinite) of one tensor, into partials[block].
// NaN is carried separately because fmax drops it.
__global__ void norm_partials_kernel(View x, int64_t n, double p, bool infinity, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0;
  bool nan = false;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const double a = fabs(static_cast<double>(load(x, offset_of(x, i))));
    nan |= a != a;
    acc = infinity ? fmax(acc, a) : acc + (p == 2 ? a * a : pow(a, p));
  }
  shared[threadIdx.x] = nan ? NAN : acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const double a = shared[threadIdx.x], b = shared[threadIdx.x + stride];
      shared[threadIdx.x] = a != a || b != b ? NAN : infinity ? fmax(a, b) : a + b;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = shared[0];
}

__global__ void norm_finish_kernel(const double* partials, int64_t count, double p, bool infinity, View out) {
  double acc = 0;
  bool nan = false;
  for (int64_t i = 0; i < count; ++i) {
    const double a = partials[i];
    nan |= a != a;
    acc = infinity ? fmax(acc, a) : acc + a;
  }
  const double norm = nan ? NAN : infinity ? acc : (p == 2 ? sqrt(acc) : pow(acc, 1 / p));
  store(out, 0, static_cast<float>(norm));
}

}  // namespace

H2_Status op_adamw(H2_Stream* stream, const H2_AdamWArgs* args) {
  return run_op("adamw", stream, args, [&](OpLaunch& l) {
    if (args->step < 1) fail(H2_STATUS_INVALID_ARGUMENT, "step must be >= 1");
    const double lr = args->lr, beta1 = args->beta1, beta2 = args->beta2, eps = args->eps;
    const double decay = 1 - args->lr * args->weight_decay, grad_scale = args->grad_scale;
    const double correction1 = 1 - std::pow(beta1, static_cast<double>(args->step));
    const double correction2 = 1 - std::pow(beta2, static_cast<double>(args->step));
    const float* found_inf = static_cast<const float*>(args->found_inf.data);
    for (uint32_t t = 0; t < args->count; ++t) {
      const View param = make_view(args->params[t]), grad = make_view(args->grads[t]);
      const View m = make_view(args->exp_avgs[t]), v = make_view(args->exp_avg_sqs[t]);
      const View model = args->model_params != nullptr ? make_view(args->model_params[t]) : View{};
      launch_map(l, numel(args->params[t]), [=] __device__(int64_t i) {
        if (flag_set(found_inf)) return;
        const int64_t po = offset_of(param, i), mo = offset_of(m, i), vo = offset_of(v, i);
        const double g = static_cast<double>(load(grad, offset_of(grad, i))) * grad_scale;
        const double m1 = beta1 * load(m, mo) + (1 - beta1) * g;
        const double v1 = beta2 * load(v, vo) + (1 - beta2) * g * g;
        const double p =
            static_cast<double>(load(param, po)) * decay - lr * (m1 / correction1) / (sqrt(v1 / correction2) + eps);
        store_any(m, mo, m1);
        store_any(v, vo, v1);
        store_any(param, po, p);
        if (model.data != nullptr) store_any(model, offset_of(model, i), static_cast<float>(p));
      });
    }
  });
}

H2_Status op_grad_norm(H2_Stream* stream, const H2_GradNormArgs* args) {
  return run_op("grad_norm", stream, args, [&](OpLaunch& l) {
    const double p = args->norm_type;
    const bool infinity = std::isinf(p) && p > 0;
    if (!infinity && !(p > 0)) fail(H2_STATUS_INVALID_ARGUMENT, "norm_type must be > 0 or +infinity");
    const size_t slots = static_cast<size_t>(std::max<uint32_t>(args->count, 1)) * kNormBlocks;
    Scratch partials(l, sizeof(double) * slots);
    H2_CUDA_CHECK(cudaMemsetAsync(partials.as<void>(), 0, sizeof(double) * slots, l.cuda));
    for (uint32_t t = 0; t < args->count; ++t) {
      const int64_t n = numel(args->tensors[t]);
      if (n == 0) continue;
      norm_partials_kernel<<<kNormBlocks, kThreads, 0, l.cuda>>>(make_view(args->tensors[t]), n, p, infinity,
                                                                 partials.as<double>() + t * kNormBlocks);
      l.check_launch("norm_partials_kernel");
    }
    norm_finish_kernel<<<1, 1, 0, l.cuda>>>(partials.as<double>(), static_cast<int64_t>(slots), p, infinity,
                                            make_view(args->out));
    l.check_launch("norm_finish_kernel");
  });
}

H2_Status op_clip_by_norm(H2_Stream* stream, const H2_ClipByNormArgs* args) {
  return run_op("clip_by_norm", stream, args, [&](OpLaunch& l) {
    const View norm = make_view(args->norm);
    const double max_norm = args->max_norm, eps = args->eps;
    for (uint32_t t = 0; t < args->count; ++t) {
      const View x = make_view(args->tensors[t]);
      launch_map(l, numel(args->tensors[t]), [=] __device__(int64_t i) {
        const double n = load(norm, 0);
        const double factor = n != n ? NAN : fmin(1.0, max_norm / (n + eps));
        const int64_t o = offset_of(x, i);
        store_any(x, o, load(x, o) * factor);
      });
    }
  });
}

H2_Status op_unscale(H2_Stream* stream, const H2_UnscaleArgs* args) {
  return run_op("unscale", stream, args, [&](OpLaunch& l) {
    const double inv_scale = args->inv_scale;
    float* found_inf = static_cast<float*>(args->found_inf.data);
    for (uint32_t t = 0; t < args->count; ++t) {
      const View x = make_view(args->tensors[t]);
      launch_map(l, numel(args->tensors[t]), [=] __device__(int64_t i) {
        const int64_t o = offset_of(x, i);
        const float v = load(x, o);
        if (!isfinite(v)) *found_inf = 1.0f;  // every writer writes the same value
        store_any(x, o, v * inv_scale);
      });
    }
  });
}

}  // namespace h2::cuda
