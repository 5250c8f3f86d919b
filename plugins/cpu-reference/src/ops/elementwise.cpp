// binary (tensor-tensor and tensor-scalar), unary, where and masked_fill: elementwise in fp64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dense.hpp"
#include "op_support.hpp"
#include "op_table.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

namespace {

double apply_binary(uint32_t op, double a, double b) {
  switch (op) {
    case H2_BINARY_ADD: return a + b;
    case H2_BINARY_SUB: return a - b;
    case H2_BINARY_MUL: return a * b;
    case H2_BINARY_DIV: return a / b;
    case H2_BINARY_POW: return std::pow(a, b);
    case H2_BINARY_MAXIMUM:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
    case H2_BINARY_MINIMUM:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::min(a, b);
    default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown binary op " + std::to_string(op));
  }
}

double apply_unary(uint32_t op, double x) {
  switch (op) {
    case H2_UNARY_EXP: return std::exp(x);
    case H2_UNARY_LOG: return std::log(x);
    case H2_UNARY_SQRT: return std::sqrt(x);
    case H2_UNARY_RSQRT: return 1 / std::sqrt(x);
    case H2_UNARY_NEG: return -x;
    case H2_UNARY_RECIPROCAL: return 1 / x;
    default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown unary op " + std::to_string(op));
  }
}

// Clones of a hot loop for AVX-512 and AVX2, picked when the plugin loads by what the CPU has. The
// x86-64 baseline is SSE2, which reduced DiComm's pieces at two thirds the speed of Open MPI's AVX op.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define H2_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define H2_VECTOR_CLONES
#endif

// y[i] = op(a[i], b[i]) for i in [0, n). `y` may be `a` or `b` exactly (in place), never partly.
H2_VECTOR_CLONES void binary_f32_span(uint32_t op, const float* a, const float* b, float* y, int64_t n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (op) {
#define H2_BINARY_LOOP(expression)                       \
  _Pragma("GCC ivdep") for (int64_t i = 0; i < n; ++i) { \
    const float x = a[i], z = b[i];                      \
    y[i] = (expression);                                 \
  }                                                      \
  return;
    case H2_BINARY_ADD: H2_BINARY_LOOP(x + z)
    case H2_BINARY_SUB: H2_BINARY_LOOP(x - z)
    case H2_BINARY_MUL: H2_BINARY_LOOP(x * z)
    case H2_BINARY_DIV: H2_BINARY_LOOP(x / z)
    case H2_BINARY_MAXIMUM: H2_BINARY_LOOP(std::isnan(x) || std::isnan(z) ? nan : std::max(x, z))
    case H2_BINARY_MINIMUM: H2_BINARY_LOOP(std::isnan(x) || std::isnan(z) ? nan : std::min(x, z))
#undef H2_BINARY_LOOP
    default: return;
  }
}

// Dense fp32 tensors: fp32 arithmetic directly. For +, -, *, / (and max/min) of two fp32 values,
// computing in fp64 and rounding once to fp32 gives exactly the correctly rounded fp32 result
// (fp64 carries more than 2·24+2 bits), so this is bit-identical to the general path and lets the
// compiler vectorise: DiComm reduces every received piece with it.
bool binary_f32(ThreadPool& pool, uint32_t op, const TensorRef& a, const TensorRef& b, const TensorRef& y) {
  if (a.dtype != H2_DTYPE_F32 || b.dtype != H2_DTYPE_F32 || y.dtype != H2_DTYPE_F32) return false;
  // pow: fp32 pow is not correctly rounded.
  if (op < H2_BINARY_ADD || op > H2_BINARY_MINIMUM || op == H2_BINARY_POW) return false;
  const float* pa = reinterpret_cast<const float*>(a.base);
  const float* pb = reinterpret_cast<const float*>(b.base);
  float* py = reinterpret_cast<float*>(y.base);
  // Waking a pool thread costs more than adding a few hundred thousand floats.
  pool.parallel_for(y.numel(), 1 << 18, [&](int64_t begin, int64_t end) {
    binary_f32_span(op, pa + begin, pb + begin, py + begin, end - begin);
  });
  return true;
}

void check_op(bool known, const char* kind, uint32_t op) {
  if (!known) fail(H2_STATUS_INVALID_ARGUMENT, std::string("unknown ") + kind + " op " + std::to_string(op));
}

}  // namespace

H2_Status op_binary(H2_Stream* stream, const H2_BinaryArgs* args) {
  return run_op("binary", stream, args, [&](OpCall& call) {
    const uint32_t op = args->op;
    check_op(op >= H2_BINARY_ADD && op <= H2_BINARY_MINIMUM, "binary", op);
    TensorRef a = call.tensor(args->a, "a"), b = call.tensor(args->b, "b"), y = call.tensor(args->y, "y");
    if (dense(a) && dense(b) && dense(y) && a.numel() == y.numel() && b.numel() == y.numel()) {
      ThreadPool* pool = &call.pool();
      call.enqueue([=] {
        if (binary_f32(*pool, op, a, b, y)) return;
        dense_elementwise(*pool, y,
                          [&](int64_t i) { return apply_binary(op, load_element(a, i), load_element(b, i)); });
      });
      return;
    }
    call.enqueue([=] {
      const Values va = load(a), vb = load(b);
      Values out(va.size());
      for (size_t i = 0; i < va.size(); ++i) out[i] = apply_binary(op, va[i], vb[i]);
      store(y, out);
    });
  });
}

H2_Status op_binary_scalar(H2_Stream* stream, const H2_BinaryScalarArgs* args) {
  return run_op("binary_scalar", stream, args, [&](OpCall& call) {
    const uint32_t op = args->op;
    check_op(op >= H2_BINARY_ADD && op <= H2_BINARY_MINIMUM, "binary", op);
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    const double scalar = args->scalar;
    const bool scalar_first = args->scalar_first != 0;
    if (dense(x) && dense(y) && x.numel() == y.numel()) {
      ThreadPool* pool = &call.pool();
      call.enqueue([=] {
        dense_elementwise(*pool, y, [&](int64_t i) {
          const double v = load_element(x, i);
          return scalar_first ? apply_binary(op, scalar, v) : apply_binary(op, v, scalar);
        });
      });
      return;
    }
    call.enqueue([=] {
      Values values = load(x);
      for (double& v : values) v = scalar_first ? apply_binary(op, scalar, v) : apply_binary(op, v, scalar);
      store(y, values);
    });
  });
}

H2_Status op_unary(H2_Stream* stream, const H2_UnaryArgs* args) {
  return run_op("unary", stream, args, [&](OpCall& call) {
    const uint32_t op = args->op;
    check_op(op >= H2_UNARY_EXP && op <= H2_UNARY_RECIPROCAL, "unary", op);
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    if (planted_defect() == Defect::ignores_strides) x.assume_contiguous();
    call.enqueue([=] {
      Values values = load(x);
      for (double& v : values) v = apply_unary(op, v);
      store(y, values);
    });
  });
}

H2_Status op_where(H2_Stream* stream, const H2_WhereArgs* args) {
  return run_op("where", stream, args, [&](OpCall& call) {
    TensorRef cond = call.tensor(args->cond, "cond"), a = call.tensor(args->a, "a"), b = call.tensor(args->b, "b");
    TensorRef y = call.tensor(args->y, "y");
    call.enqueue([=] {
      const std::vector<int64_t> c = load_indices(cond);
      const Values va = load(a), vb = load(b);
      Values out(va.size());
      for (size_t i = 0; i < out.size(); ++i) out[i] = c[i] != 0 ? va[i] : vb[i];
      store(y, out);
    });
  });
}

H2_Status op_masked_fill(H2_Stream* stream, const H2_MaskedFillArgs* args) {
  return run_op("masked_fill", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), mask = call.tensor(args->mask, "mask"), y = call.tensor(args->y, "y");
    const double value = args->value;
    call.enqueue([=] {
      const std::vector<int64_t> m = load_indices(mask);
      Values values = load(x);
      for (size_t i = 0; i < values.size(); ++i)
        if (m[i] != 0) values[i] = value;
      store(y, values);
    });
  });
}

}  // namespace h2::cpu_reference
