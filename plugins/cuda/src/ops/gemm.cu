// gemm through cuBLAS (cublasGemmStridedBatchedEx) with fp32 accumulation. H2's row-major
// C = op(A) op(B) is cuBLAS's column-major C^T = op(B)^T op(A)^T, so each operand is described as the
// column-major matrix cuBLAS reads; an operand whose strides cuBLAS cannot express (neither dimension
// unit-stride, or broadcast) is first copied to a contiguous scratch tensor.
#include <climits>
#include <mutex>

#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

cudaDataType_t cuda_type(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F16: return CUDA_R_16F;
    case H2_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// A matrix as cuBLAS reads it.
struct Operand {
  const void* data;
  cudaDataType_t type;
  cublasOperation_t op;
  int64_t ld;
  int64_t batch_stride;
};

// The last two dimensions' strides and the batch stride of a rank-2 or rank-3 tensor.
struct Layout {
  int64_t rows, cols, row_stride, col_stride, batch, batch_stride;
};

Layout layout_of(const H2_Tensor& t) {
  const uint32_t r = t.rank;
  return {t.shape[r - 2],   t.shape[r - 1],          t.strides[r - 2],
          t.strides[r - 1], r == 3 ? t.shape[0] : 1, r == 3 && t.shape[0] > 1 ? t.strides[0] : 0};
}

// The column-major Q [ra x cb] with Q(a, b) at a * sa + b * sb, as an operand, if cuBLAS can read it.
bool describe(int64_t ra, int64_t cb, int64_t sa, int64_t sb, Operand& operand) {
  if ((sa == 1 || ra == 1) && (sb >= std::max<int64_t>(ra, 1) || cb == 1)) {
    operand.op = CUBLAS_OP_N;
    operand.ld = cb == 1 ? std::max<int64_t>(ra, 1) : sb;
    return true;
  }
  if ((sb == 1 || cb == 1) && (sa >= std::max<int64_t>(cb, 1) || ra == 1)) {
    operand.op = CUBLAS_OP_T;
    operand.ld = ra == 1 ? std::max<int64_t>(cb, 1) : sa;
    return true;
  }
  return false;
}

// `t`'s descriptor moved to `data` with contiguous strides.
H2_Tensor contiguous_like(const H2_Tensor& t, void* data) {
  H2_Tensor out = t;
  out.data = data;
  int64_t stride = 1;
  for (int d = static_cast<int>(t.rank) - 1; d >= 0; --d) {
    out.strides[d] = stride;
    stride *= t.shape[d];
  }
  return out;
}

// A contiguous copy of `t` (same dtype) in `scratch`.
H2_Tensor contiguous_copy(const OpLaunch& l, const H2_Tensor& t, const Scratch& scratch) {
  const H2_Tensor out = contiguous_like(t, scratch.as<void>());
  const View from = make_view(t), to = make_view(out);
  launch_map(l, numel(t), [=] __device__(int64_t i) { store(to, i, load(from, offset_of(from, i))); });
  return out;
}

size_t bytes_of(const H2_Tensor& t) {
  return static_cast<size_t>(numel(t)) * element_size(t.dtype);
}

void check_int(int64_t value, const char* what) {
  if (value > INT_MAX) fail(H2_STATUS_UNSUPPORTED, std::string(what) + " beyond 2^31 - 1 is not supported");
}

}  // namespace

H2_Status op_gemm(H2_Stream* stream, const H2_GemmArgs* args) {
  return run_op("gemm", stream, args, [&](OpLaunch& l) {
    const bool ta = args->transpose_a != 0, tb = args->transpose_b != 0;
    H2_Tensor a = args->a, b = args->b, c = args->c;
    const Layout la0 = layout_of(a), lc = layout_of(c);
    const int64_t m = lc.rows, n = lc.cols, k = ta ? la0.rows : la0.cols, batch = lc.batch;
    if (m == 0 || n == 0 || batch == 0) return;
    const View cv = make_view(c), bias = make_view(args->bias);
    const double alpha = args->alpha, beta = args->beta;

    if (k == 0) {  // no products: C = beta C + bias
      launch_map(l, numel(c), [=] __device__(int64_t i) {
        const int64_t o = offset_of(cv, i);
        const double old = beta == 0 ? 0.0 : beta * load(cv, o);
        store_any(cv, o, old + (bias.data != nullptr ? load(bias, offset_of(bias, i % n)) : 0.0));
      });
      return;
    }

    // B' = op(B)^T [n x k] and A' = op(A)^T [k x m] in column-major terms.
    Operand first{b.data, cuda_type(b.dtype)}, second{a.data, cuda_type(a.dtype)};
    std::unique_ptr<Scratch> a_copy, b_copy, c_copy;
    auto prepare = [&](H2_Tensor& t, bool transposed, int64_t ra, int64_t cb, Operand& operand,
                       std::unique_ptr<Scratch>& copy) {
      Layout lt = layout_of(t);
      // op(T)[i][j] is at i * r + j * s; Q(a, b) = op(T)[b][a].
      auto strides = [&](const Layout& x) {
        const int64_t r = transposed ? x.col_stride : x.row_stride, s = transposed ? x.row_stride : x.col_stride;
        return std::pair<int64_t, int64_t>{s, r};
      };
      auto [sa, sb] = strides(lt);
      if (!describe(ra, cb, sa, sb, operand)) {
        copy = std::make_unique<Scratch>(l, bytes_of(t));
        t = contiguous_copy(l, t, *copy);
        lt = layout_of(t);
        std::tie(sa, sb) = strides(lt);
        if (!describe(ra, cb, sa, sb, operand)) fail(H2_STATUS_INTERNAL, "a contiguous operand is not describable");
      }
      operand.data = t.data;
      operand.batch_stride = lt.batch_stride;
    };
    prepare(b, tb, n, k, first, b_copy);
    prepare(a, ta, k, m, second, a_copy);

    // C^T column-major [n x m] with ld = C's row stride. cuBLAS writes a scratch instead of C when it
    // cannot describe C's strides, and an f32 scratch when C is 16-bit and something is added to the
    // products (a bias, or beta C): there cuBLAS rounds the products to C's type before it adds C (seen
    // on an H200: bf16 results 0.74 of a unit in the last place off, where one rounding is allowed).
    // A scratch starts as beta C + bias, cuBLAS adds the products to it, and one store rounds to C.
    const bool adds = bias.data != nullptr || beta != 0;
    const bool wide = c.dtype != H2_DTYPE_F32 && adds;
    H2_Tensor target = c;
    float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
    bool add_bias_after = false;
    if (wide || (lc.col_stride != 1 && n > 1) || (lc.row_stride < n && m > 1)) {
      H2_Tensor scratch_shape = c;
      if (wide) scratch_shape.dtype = H2_DTYPE_F32;
      c_copy = std::make_unique<Scratch>(l, bytes_of(scratch_shape));
      target = contiguous_like(scratch_shape, c_copy->as<void>());
      if (adds) {
        const View sv = make_view(target);
        launch_map(l, numel(target), [=] __device__(int64_t i) {
          const double old = beta == 0 ? 0.0 : beta * static_cast<double>(load(cv, offset_of(cv, i)));
          store_any(sv, i, old + (bias.data != nullptr ? load(bias, offset_of(bias, i % n)) : 0.0));
        });
        beta_f = 1;
      }
    } else if (bias.data != nullptr && beta == 0) {
      // C starts as the bias rows and cuBLAS adds the products with one rounding.
      const View tv = make_view(target);
      launch_map(l, numel(target),
                 [=] __device__(int64_t i) { store(tv, offset_of(tv, i), load(bias, offset_of(bias, i % n))); });
      beta_f = 1;
    } else {
      add_bias_after = bias.data != nullptr;  // f32 C in place with beta != 0
    }
    const Layout lt = layout_of(target);
    const int64_t ldc = m == 1 ? std::max<int64_t>(n, lt.row_stride) : lt.row_stride;
    const View tv = make_view(target);

    for (int64_t v : {m, n, k, first.ld, second.ld, ldc, batch}) check_int(v, "a gemm dimension or stride");
    {
      std::lock_guard lock(l.stream->mutex);
      check(cublasGemmStridedBatchedEx(l.stream->blas, first.op, second.op, static_cast<int>(n), static_cast<int>(m),
                                       static_cast<int>(k), &alpha_f, first.data, first.type,
                                       static_cast<int>(first.ld), first.batch_stride, second.data, second.type,
                                       static_cast<int>(second.ld), second.batch_stride, &beta_f, target.data,
                                       cuda_type(target.dtype), static_cast<int>(ldc), lt.batch_stride,
                                       static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    }
    if (add_bias_after) {
      launch_map(l, numel(target), [=] __device__(int64_t i) {
        const int64_t o = offset_of(tv, i);
        store(tv, o, load(tv, o) + load(bias, offset_of(bias, i % n)));
      });
    }
    if (c_copy) {  // back into the caller's layout
      launch_map(l, numel(c), [=] __device__(int64_t i) { store(cv, offset_of(cv, i), load(tv, i)); });
    }
  });
}

}  // namespace h2::cuda
