// Elementwise operators: activations, arithmetic, selection, copies and factories. Arithmetic runs
// in fp64 registers and rounds once to the output dtype, as the reference does; memory bandwidth,
// not fp64 throughput, bounds these kernels.
#include <cmath>

#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

// (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)), as the reference computes it: 1 + tanh(u) cancels far
// left of 0 (at x = -6 it keeps 5 digits of fp64; the first H100 run of suite 1.3 failed there).
__device__ double tanh_cdf(double x) {
  return 1 / (1 + exp(-2 * kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

__device__ double gelu_value(double x, bool approximate) {
  if (approximate) return isinf(x) ? (x > 0 ? x : 0.0) : x * tanh_cdf(x);
  return 0.5 * x * erfc(-x * M_SQRT1_2);  // as the reference: erfc keeps the far-left tail's digits
}

__device__ double gelu_derivative(double x, bool approximate) {
  if (approximate) {
    const double s = tanh_cdf(x);  // (1 + t) / 2, so (1 - t^2) / 2 = 2 s (1 - s)
    return s + 2 * x * s * (1 - s) * kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x);
  }
  const double cdf = 0.5 * erfc(-x * M_SQRT1_2);
  const double pdf = exp(-0.5 * x * x) * 0.3989422804014327;
  return cdf + x * pdf;
}

__device__ double sigmoid(double x) {
  return 1 / (1 + exp(-x));
}

__device__ double binary_value(uint32_t op, double a, double b) {
  switch (op) {
    case H2_BINARY_ADD: return a + b;
    case H2_BINARY_SUB: return a - b;
    case H2_BINARY_MUL: return a * b;
    case H2_BINARY_DIV: return a / b;
    case H2_BINARY_POW: return pow(a, b);
    case H2_BINARY_MAXIMUM: return a != a || b != b ? NAN : fmax(a, b);
    default: return a != a || b != b ? NAN : fmin(a, b);
  }
}

// The inputs as the output dtype would hold them: F32 arithmetic of F32 values must round like the
// reference's fp64-then-round, which computing in fp64 from the stored values does.
__device__ double in(const View& v, int64_t i) {
  return load(v, offset_of(v, i));
}
__device__ void out(const View& v, int64_t i, double value) {
  store_any(v, offset_of(v, i), value);
}

void check_binary_op(uint32_t op) {
  if (op < H2_BINARY_ADD || op > H2_BINARY_MINIMUM)
    fail(H2_STATUS_INVALID_ARGUMENT, "unknown op " + std::to_string(op));
}

}  // namespace

H2_Status op_gelu(H2_Stream* stream, const H2_GeluArgs* args) {
  return run_op("gelu", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), y = make_view(args->y);
    const bool approximate = args->approximate != 0;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) { out(y, i, gelu_value(in(x, i), approximate)); });
  });
}

H2_Status op_gelu_backward(H2_Stream* stream, const H2_GeluBackwardArgs* args) {
  return run_op("gelu_backward", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), dy = make_view(args->dy), dx = make_view(args->dx);
    const bool approximate = args->approximate != 0;
    launch_map(l, numel(args->dx),
               [=] __device__(int64_t i) { out(dx, i, in(dy, i) * gelu_derivative(in(x, i), approximate)); });
  });
}

H2_Status op_silu(H2_Stream* stream, const H2_SiluArgs* args) {
  return run_op("silu", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), y = make_view(args->y);
    launch_map(l, numel(args->y), [=] __device__(int64_t i) {
      const double v = in(x, i);
      out(y, i, v * sigmoid(v));
    });
  });
}

H2_Status op_silu_backward(H2_Stream* stream, const H2_SiluBackwardArgs* args) {
  return run_op("silu_backward", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), dy = make_view(args->dy), dx = make_view(args->dx);
    launch_map(l, numel(args->dx), [=] __device__(int64_t i) {
      const double v = in(x, i), s = sigmoid(v);
      out(dx, i, in(dy, i) * s * (1 + v * (1 - s)));
    });
  });
}

H2_Status op_swiglu(H2_Stream* stream, const H2_SwigluArgs* args) {
  return run_op("swiglu", stream, args, [&](OpLaunch& l) {
    const View gate = make_view(args->gate), up = make_view(args->up), y = make_view(args->y);
    launch_map(l, numel(args->y), [=] __device__(int64_t i) {
      const double g = in(gate, i);
      out(y, i, g * sigmoid(g) * in(up, i));
    });
  });
}

H2_Status op_swiglu_backward(H2_Stream* stream, const H2_SwigluBackwardArgs* args) {
  return run_op("swiglu_backward", stream, args, [&](OpLaunch& l) {
    const View gate = make_view(args->gate), up = make_view(args->up), dy = make_view(args->dy);
    const View dgate = make_view(args->dgate), dup = make_view(args->dup);
    launch_map(l, numel(args->dy), [=] __device__(int64_t i) {
      const double g = in(gate, i), u = in(up, i), d = in(dy, i), s = sigmoid(g);
      out(dgate, i, d * u * s * (1 + g * (1 - s)));
      out(dup, i, d * g * s);
    });
  });
}

H2_Status op_binary(H2_Stream* stream, const H2_BinaryArgs* args) {
  return run_op("binary", stream, args, [&](OpLaunch& l) {
    check_binary_op(args->op);
    const View a = make_view(args->a), b = make_view(args->b), y = make_view(args->y);
    const uint32_t op = args->op;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) { out(y, i, binary_value(op, in(a, i), in(b, i))); });
  });
}

H2_Status op_binary_scalar(H2_Stream* stream, const H2_BinaryScalarArgs* args) {
  return run_op("binary_scalar", stream, args, [&](OpLaunch& l) {
    check_binary_op(args->op);
    const View x = make_view(args->x), y = make_view(args->y);
    const uint32_t op = args->op;
    const double s = args->scalar;
    const bool first = args->scalar_first != 0;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) {
      const double v = in(x, i);
      out(y, i, first ? binary_value(op, s, v) : binary_value(op, v, s));
    });
  });
}

H2_Status op_unary(H2_Stream* stream, const H2_UnaryArgs* args) {
  return run_op("unary", stream, args, [&](OpLaunch& l) {
    if (args->op < H2_UNARY_EXP || args->op > H2_UNARY_RECIPROCAL)
      fail(H2_STATUS_INVALID_ARGUMENT, "unknown op " + std::to_string(args->op));
    const View x = make_view(args->x), y = make_view(args->y);
    const uint32_t op = args->op;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) {
      const double v = in(x, i);
      double r;
      switch (op) {
        case H2_UNARY_EXP: r = exp(v); break;
        case H2_UNARY_LOG: r = log(v); break;
        case H2_UNARY_SQRT: r = sqrt(v); break;
        case H2_UNARY_RSQRT: r = 1 / sqrt(v); break;
        case H2_UNARY_NEG: r = -v; break;
        default: r = 1 / v;
      }
      out(y, i, r);
    });
  });
}

H2_Status op_where(H2_Stream* stream, const H2_WhereArgs* args) {
  return run_op("where", stream, args, [&](OpLaunch& l) {
    const View cond = make_view(args->cond), a = make_view(args->a), b = make_view(args->b), y = make_view(args->y);
    launch_map(l, numel(args->y),
               [=] __device__(int64_t i) { out(y, i, load_flag(cond, offset_of(cond, i)) ? in(a, i) : in(b, i)); });
  });
}

H2_Status op_masked_fill(H2_Stream* stream, const H2_MaskedFillArgs* args) {
  return run_op("masked_fill", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), mask = make_view(args->mask), y = make_view(args->y);
    const double value = args->value;
    launch_map(l, numel(args->y),
               [=] __device__(int64_t i) { out(y, i, load_flag(mask, offset_of(mask, i)) ? value : in(x, i)); });
  });
}

H2_Status op_copy(H2_Stream* stream, const H2_CopyArgs* args) {
  return run_op("copy", stream, args, [&](OpLaunch& l) {
    const View x = make_view(args->x), y = make_view(args->y);
    const int64_t n = numel(args->y);
    if (n == 0) return;
    if (x.dtype == y.dtype && x.contiguous && y.contiguous) {
      H2_CUDA_CHECK(
          cudaMemcpyAsync(y.data, x.data, static_cast<size_t>(n) * y.element_size, cudaMemcpyDeviceToDevice, l.cuda));
      return;
    }
    if (x.dtype == y.dtype) {  // any layout, same dtype: move the bits
      const int size = y.element_size;
      launch_map(l, n, [=] __device__(int64_t i) {
        const char* from = x.data + offset_of(x, i) * size;
        char* to = y.data + offset_of(y, i) * size;
        for (int b = 0; b < size; ++b) to[b] = from[b];
      });
      return;
    }
    launch_map(l, n, [=] __device__(int64_t i) { store_any(y, offset_of(y, i), load_any(x, offset_of(x, i))); });
  });
}

H2_Status op_fill(H2_Stream* stream, const H2_FillArgs* args) {
  return run_op("fill", stream, args, [&](OpLaunch& l) {
    const View y = make_view(args->y);
    const double value = args->value;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) { store_any(y, offset_of(y, i), value); });
  });
}

H2_Status op_arange(H2_Stream* stream, const H2_ArangeArgs* args) {
  return run_op("arange", stream, args, [&](OpLaunch& l) {
    const View y = make_view(args->y);
    const double start = args->start, step = args->step;
    launch_map(l, numel(args->y),
               [=] __device__(int64_t i) { store_any(y, offset_of(y, i), start + static_cast<double>(i) * step); });
  });
}

}  // namespace h2::cuda
