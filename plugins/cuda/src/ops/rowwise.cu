// Operators over the last dimension: softmax, layer norm, RMS norm, cross-entropy and their
// backwards. One block of 256 threads per row, fp32 accumulation with block reductions of a fixed
// order (bit-identical from run to run), any strides.
#include <cmath>

#include "launch.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

constexpr int kRowThreads = 256;

// Element j of row r of v.
struct Row {
  const View& v;
  int64_t base, step;
  __device__ Row(const View& view, int64_t r) : v(view), base(row_offset(view, r)), step(col_stride(view)) {}
  __device__ float operator[](int64_t j) const { return load(v, base + j * step); }
  __device__ void set(int64_t j, float value) const { store(v, base + j * step, value); }
};

__device__ float optional_value(const View& v, int64_t j, float absent) {
  return v.data == nullptr ? absent : load(v, offset_of(v, j));
}

__global__ void softmax_kernel(View x, View y, int64_t rows, int64_t cols, int64_t matrix_rows, float scale,
                               bool causal) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row in(x, r), out(y, r);
  // Keys visible to this query: j <= i + cols - matrix_rows.
  const int64_t visible = causal ? min(cols, r % matrix_rows + cols - matrix_rows + 1) : cols;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) max = fmaxf(max, scale * in[j]);
  max = block_max(max, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(scale * in[j] - max);
  sum = block_sum(sum, shared);
  const float inverse = visible > 0 ? 1 / sum : 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    out.set(j, j < visible ? expf(scale * in[j] - max) * inverse : 0.0f);
}

__global__ void softmax_backward_kernel(View y, View dy, View dx, int64_t rows, int64_t cols, float scale) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row yr(y, r), dyr(dy, r), dxr(dx, r);
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += dyr[j] * yr[j];
  dot = block_sum(dot, shared);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dxr.set(j, scale * yr[j] * (dyr[j] - dot));
}

__global__ void layer_norm_kernel(View x, View weight, View bias, View y, View mean_out, View rstd_out, int64_t rows,
                                  int64_t cols, float eps) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row in(x, r), out(y, r);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += in[j];
  const float mean = block_sum(sum, shared) / cols;
  float squares = 0;  // two passes: no cancellation in the variance
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = in[j] - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(block_sum(squares, shared) / cols + eps);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    out.set(j, (in[j] - mean) * rstd * optional_value(weight, j, 1) + optional_value(bias, j, 0));
  if (threadIdx.x == 0) {
    store(mean_out, offset_of(mean_out, r), mean);
    store(rstd_out, offset_of(rstd_out, r), rstd);
  }
}

// dx of layer norm (center == true) and RMS norm (center == false) from the saved statistics.
__global__ void norm_backward_kernel(View x, View weight, View mean_in, View rstd_in, View dy, View dx, int64_t rows,
                                     int64_t cols, bool center) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row xr(x, r), dyr(dy, r), dxr(dx, r);
  const float mean = center ? load(mean_in, offset_of(mean_in, r)) : 0.0f;
  const float rstd = load(rstd_in, offset_of(rstd_in, r));
  float sum_g = 0, sum_gx = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = dyr[j] * optional_value(weight, j, 1);
    sum_g += g;
    sum_gx += g * (xr[j] - mean) * rstd;
  }
  const float mean_g = center ? block_sum(sum_g, shared) / cols : 0.0f;
  const float mean_gx = block_sum(sum_gx, shared) / cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = dyr[j] * optional_value(weight, j, 1);
    dxr.set(j, rstd * (g - mean_g - (xr[j] - mean) * rstd * mean_gx));
  }
}

// dweight (sum over rows of dy * xhat) and dbias (sum of dy) in two deterministic passes: partial
// sums over fixed chunks of rows, then the chunks in order.
constexpr int kRowChunks = 64;

__global__ void norm_parameter_partials_kernel(View x, View mean_in, View rstd_in, View dy, float* partial_weight,
                                               float* partial_bias, int64_t rows, int64_t cols, int64_t chunk,
                                               bool center) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t first = blockIdx.y * chunk, last = min(rows, first + chunk);
  if (j >= cols) return;
  float w = 0, b = 0;
  for (int64_t r = first; r < last; ++r) {
    const float mean = center ? load(mean_in, offset_of(mean_in, r)) : 0.0f;
    const float rstd = load(rstd_in, offset_of(rstd_in, r));
    const float g = load(dy, row_offset(dy, r) + j * col_stride(dy));
    w += g * (load(x, row_offset(x, r) + j * col_stride(x)) - mean) * rstd;
    b += g;
  }
  partial_weight[blockIdx.y * cols + j] = w;
  partial_bias[blockIdx.y * cols + j] = b;
}

__global__ void norm_parameter_finish_kernel(const float* partial_weight, const float* partial_bias, View dweight,
                                             View dbias, int64_t cols, int chunks) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= cols) return;
  float w = 0, b = 0;
  for (int c = 0; c < chunks; ++c) {
    w += partial_weight[c * cols + j];
    b += partial_bias[c * cols + j];
  }
  if (dweight.data != nullptr) store(dweight, offset_of(dweight, j), w);
  if (dbias.data != nullptr) store(dbias, offset_of(dbias, j), b);
}

void norm_parameter_gradients(const OpLaunch& l, const View& x, const View& mean, const View& rstd, const View& dy,
                              const View& dweight, const View& dbias, int64_t rows, int64_t cols, bool center) {
  if (dweight.data == nullptr && dbias.data == nullptr) return;
  const int chunks = static_cast<int>(std::min<int64_t>(kRowChunks, std::max<int64_t>(rows, 1)));
  const int64_t chunk = (rows + chunks - 1) / chunks;
  Scratch partials(l, sizeof(float) * 2 * static_cast<size_t>(chunks * cols));
  float* w = partials.as<float>();
  float* b = w + chunks * cols;
  const unsigned col_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  norm_parameter_partials_kernel<<<dim3(col_blocks, static_cast<unsigned>(chunks)), kThreads, 0, l.cuda>>>(
      x, mean, rstd, dy, w, b, rows, cols, chunk, center);
  l.check_launch("norm_parameter_partials_kernel");
  norm_parameter_finish_kernel<<<col_blocks, kThreads, 0, l.cuda>>>(w, b, dweight, dbias, cols, chunks);
  l.check_launch("norm_parameter_finish_kernel");
}

__global__ void rms_norm_kernel(View x, View weight, View y, View rstd_out, int64_t rows, int64_t cols, float eps) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row in(x, r), out(y, r);
  float squares = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) squares += in[j] * in[j];
  const float rstd = rsqrtf(block_sum(squares, shared) / cols + eps);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out.set(j, in[j] * rstd * optional_value(weight, j, 1));
  if (threadIdx.x == 0) store(rstd_out, offset_of(rstd_out, r), rstd);
}

__global__ void cross_entropy_kernel(View logits, View targets, View loss, View lse_out, int64_t rows, int64_t vocab,
                                     long long ignore_index, float smoothing, DeviceError* error) {
  __shared__ float shared[32];
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row x(logits, r);
  float max = -INFINITY, sum_x = 0;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    max = fmaxf(max, x[j]);
    sum_x += x[j];
  }
  max = block_max(max, shared);
  sum_x = block_sum(sum_x, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(x[j] - max);
  sum = block_sum(sum, shared);
  if (threadIdx.x != 0) return;
  const float lse = max + logf(sum);
  const int64_t t = load_index(targets, offset_of(targets, r));
  float value = 0;
  if (t != ignore_index) {
    if (t < 0 || t >= vocab) {
      report_index_error(error, H2_OP_CROSS_ENTROPY, 0, t, vocab);
      return;
    }
    value = lse - (1 - smoothing) * x[t] - smoothing * sum_x / vocab;
  }
  store(lse_out, offset_of(lse_out, r), lse);
  store(loss, offset_of(loss, r), value);
}

__global__ void cross_entropy_backward_kernel(View logits, View targets, View lse, View dloss, View dlogits,
                                              int64_t rows, int64_t vocab, long long ignore_index, float smoothing,
                                              DeviceError* error) {
  const int64_t r = block_row();
  if (r >= rows) return;
  const Row x(logits, r), out(dlogits, r);
  const int64_t t = load_index(targets, offset_of(targets, r));
  const bool ignored = t == ignore_index;
  if (!ignored && (t < 0 || t >= vocab)) {
    if (threadIdx.x == 0) report_index_error(error, H2_OP_CROSS_ENTROPY_BACKWARD, 0, t, vocab);
    return;
  }
  const float g = ignored ? 0.0f : load(dloss, offset_of(dloss, r));
  const float row_lse = load(lse, offset_of(lse, r));
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = expf(x[j] - row_lse);
    out.set(j, ignored ? 0.0f : g * (p - (j == t ? 1 - smoothing : 0.0f) - smoothing / vocab));
  }
}

}  // namespace

H2_Status op_softmax(H2_Stream* stream, const H2_SoftmaxArgs* args) {
  return run_op("softmax", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->x), cols = cols_of(args->x);
    const int64_t matrix_rows = args->x.rank >= 2 ? args->x.shape[args->x.rank - 2] : 1;
    if (rows == 0) return;
    softmax_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(make_view(args->x), make_view(args->y), rows, cols,
                                                                   matrix_rows, static_cast<float>(args->scale),
                                                                   args->causal != 0);
    l.check_launch("softmax_kernel");
  });
}

H2_Status op_softmax_backward(H2_Stream* stream, const H2_SoftmaxBackwardArgs* args) {
  return run_op("softmax_backward", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->y), cols = cols_of(args->y);
    if (rows == 0) return;
    softmax_backward_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(
        make_view(args->y), make_view(args->dy), make_view(args->dx), rows, cols, static_cast<float>(args->scale));
    l.check_launch("softmax_backward_kernel");
  });
}

H2_Status op_layer_norm(H2_Stream* stream, const H2_LayerNormArgs* args) {
  return run_op("layer_norm", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->x), cols = cols_of(args->x);
    if (rows == 0) return;
    layer_norm_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(
        make_view(args->x), make_view(args->weight), make_view(args->bias), make_view(args->y), make_view(args->mean),
        make_view(args->rstd), rows, cols, static_cast<float>(args->eps));
    l.check_launch("layer_norm_kernel");
  });
}

H2_Status op_layer_norm_backward(H2_Stream* stream, const H2_LayerNormBackwardArgs* args) {
  return run_op("layer_norm_backward", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->x), cols = cols_of(args->x);
    const View x = make_view(args->x), mean = make_view(args->mean), rstd = make_view(args->rstd);
    const View dy = make_view(args->dy);
    if (rows > 0) {
      norm_backward_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(x, make_view(args->weight), mean, rstd, dy,
                                                                           make_view(args->dx), rows, cols, true);
      l.check_launch("norm_backward_kernel");
    }
    norm_parameter_gradients(l, x, mean, rstd, dy, make_view(args->dweight), make_view(args->dbias), rows, cols, true);
  });
}

H2_Status op_rms_norm(H2_Stream* stream, const H2_RmsNormArgs* args) {
  return run_op("rms_norm", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->x), cols = cols_of(args->x);
    if (rows == 0) return;
    rms_norm_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(make_view(args->x), make_view(args->weight),
                                                                    make_view(args->y), make_view(args->rstd), rows,
                                                                    cols, static_cast<float>(args->eps));
    l.check_launch("rms_norm_kernel");
  });
}

H2_Status op_rms_norm_backward(H2_Stream* stream, const H2_RmsNormBackwardArgs* args) {
  return run_op("rms_norm_backward", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->x), cols = cols_of(args->x);
    const View x = make_view(args->x), rstd = make_view(args->rstd), dy = make_view(args->dy);
    const View none{};
    if (rows > 0) {
      norm_backward_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(x, make_view(args->weight), none, rstd, dy,
                                                                           make_view(args->dx), rows, cols, false);
      l.check_launch("norm_backward_kernel");
    }
    norm_parameter_gradients(l, x, none, rstd, dy, make_view(args->dweight), none, rows, cols, false);
  });
}

H2_Status op_cross_entropy(H2_Stream* stream, const H2_CrossEntropyArgs* args) {
  return run_op("cross_entropy", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->logits), vocab = cols_of(args->logits);
    if (rows == 0) return;
    cross_entropy_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(
        make_view(args->logits), make_view(args->targets), make_view(args->loss), make_view(args->lse), rows, vocab,
        args->ignore_index, static_cast<float>(args->label_smoothing), l.error);
    l.check_launch("cross_entropy_kernel");
  });
}

H2_Status op_cross_entropy_backward(H2_Stream* stream, const H2_CrossEntropyBackwardArgs* args) {
  return run_op("cross_entropy_backward", stream, args, [&](OpLaunch& l) {
    const int64_t rows = rows_of(args->logits), vocab = cols_of(args->logits);
    if (rows == 0) return;
    cross_entropy_backward_kernel<<<grid_of_rows(rows), kRowThreads, 0, l.cuda>>>(
        make_view(args->logits), make_view(args->targets), make_view(args->lse), make_view(args->dloss),
        make_view(args->dlogits), rows, vocab, args->ignore_index, static_cast<float>(args->label_smoothing), l.error);
    l.check_launch("cross_entropy_backward_kernel");
  });
}

}  // namespace h2::cuda
