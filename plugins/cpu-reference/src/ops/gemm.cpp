// gemm: C = alpha * op(A) @ op(B) + beta * C + bias, accumulated in fp64 and rounded once.
#include <algorithm>
#include <csignal>
#include <vector>

#include "common.hpp"
#include "op_support.hpp"
#include "op_table.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

namespace {

// op(X) of batch `batch` as a row-major [rows, cols] fp64 matrix.
Values pack_matrix(const TensorRef& x, int64_t batch, bool transpose, int64_t rows, int64_t cols) {
  const int r = x.rank;
  const int64_t batch_offset = r == 3 && x.shape[0] > 1 ? batch * x.strides[0] : 0;
  const int64_t row_stride = transpose ? x.strides[r - 1] : x.strides[r - 2];
  const int64_t col_stride = transpose ? x.strides[r - 2] : x.strides[r - 1];
  Values m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m[static_cast<size_t>(i * cols + j)] = load_element(x, batch_offset + i * row_stride + j * col_stride);
  return m;
}

// The test plugin's gemm variants (see planted_defects.hpp); the real reference never calls this.
void planted_accumulate(Values& acc, const Values& A, const Values& B, int64_t i, int64_t k, int64_t n,
                        H2_DType dtype) {
  const Defect defect = planted_defect();
  if (defect == Defect::crash_on_shape && n == 7) std::raise(SIGSEGV);
  const bool half = dtype == H2_DTYPE_F16 || dtype == H2_DTYPE_BF16;
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0;
    float block_sum = 0, total = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double product = A[static_cast<size_t>(i * k + p)] * B[static_cast<size_t>(p * n + j)];
      if (defect == Defect::fp16_accumulation && half) {
        sum = f16_to_f64(f64_to_f16(sum + product));  // every partial sum rounded to fp16
      } else if (defect == Defect::blocked_fp32_gemm) {
        block_sum += static_cast<float>(product);
        if ((p + 1) % 64 == 0 || p + 1 == k) {
          total += block_sum;
          block_sum = 0;
        }
      } else {
        sum += product;
      }
    }
    acc[static_cast<size_t>(j)] = defect == Defect::blocked_fp32_gemm ? static_cast<double>(total) : sum;
  }
}

void gemm_kernel(ThreadPool& pool, const TensorRef& a, const TensorRef& b, const TensorRef& c, const TensorRef& bias,
                 bool transpose_a, bool transpose_b, double alpha, double beta) {
  const int r = c.rank;
  const int64_t batches = r == 3 ? c.shape[0] : 1;
  const int64_t m = c.shape[r - 2], n = c.shape[r - 1];
  const int64_t k = transpose_a ? a.shape[a.rank - 2] : a.shape[a.rank - 1];
  if (m == 0 || n == 0) return;

  Values bias_row(static_cast<size_t>(n), 0.0);
  if (bias.present)
    for (int64_t j = 0; j < n; ++j) bias_row[static_cast<size_t>(j)] = load_element(bias, j * bias.strides[0]);

  for (int64_t batch = 0; batch < batches; ++batch) {
    const Values A = pack_matrix(a, batch, transpose_a, m, k);
    const Values B = pack_matrix(b, batch, transpose_b, k, n);
    const int64_t c_batch = r == 3 ? batch * c.strides[0] : 0;
    pool.parallel_for(m, 8, [&](int64_t row_begin, int64_t row_end) {
      Values acc(static_cast<size_t>(n));
      for (int64_t i = row_begin; i < row_end; ++i) {
        // Each C element sums over p in order: the same result whatever the row split.
        std::fill(acc.begin(), acc.end(), 0.0);
        if (planted_defect() != Defect::none) {
          planted_accumulate(acc, A, B, i, k, n, a.dtype);
        } else {
          for (int64_t p = 0; p < k; ++p) {
            const double aip = A[static_cast<size_t>(i * k + p)];
            const double* brow = &B[static_cast<size_t>(p * n)];
            for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += aip * brow[j];
          }
        }
        for (int64_t j = 0; j < n; ++j) {
          const int64_t offset = c_batch + i * c.strides[r - 2] + j * c.strides[r - 1];
          double value = alpha * acc[static_cast<size_t>(j)] + bias_row[static_cast<size_t>(j)];
          if (beta != 0 || planted_defect() == Defect::gemm_reads_c) value += beta * load_element(c, offset);
          store_element(c, offset, value);
        }
      }
    });
  }
}

}  // namespace

H2_Status op_gemm(H2_Stream* stream, const H2_GemmArgs* args) {
  return run_op("gemm", stream, args, [&](OpCall& call) {
    TensorRef a = call.tensor(args->a, "a"), b = call.tensor(args->b, "b"), c = call.tensor(args->c, "c");
    TensorRef bias = call.tensor(args->bias, "bias");
    const bool ta = args->transpose_a != 0, tb = args->transpose_b != 0;
    const double alpha = args->alpha, beta = args->beta;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { gemm_kernel(pool, a, b, c, bias, ta, tb, alpha, beta); });
  });
}

}  // namespace h2::cpu_reference
