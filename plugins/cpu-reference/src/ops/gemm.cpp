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
Values pack_matrix(ThreadPool& pool, const TensorRef& x, int64_t batch, bool transpose, int64_t rows, int64_t cols) {
  const int r = x.rank;
  const int64_t batch_offset = r == 3 && x.shape[0] > 1 ? batch * x.strides[0] : 0;
  const int64_t row_stride = transpose ? x.strides[r - 1] : x.strides[r - 2];
  const int64_t col_stride = transpose ? x.strides[r - 2] : x.strides[r - 1];
  Values m(static_cast<size_t>(rows * cols));
  pool.parallel_for(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < cols; ++j)
        m[static_cast<size_t>(i * cols + j)] = load_element(x, batch_offset + i * row_stride + j * col_stride);
  });
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

  // C in tiles of kTileRows x kTileCols, one tile per task: a tile's rows share each row segment of B
  // while it is in cache, and small-m gemms (a few tokens against a wide weight) still use every
  // thread. Each C element still sums its products in p order from 0, so the result is the same for
  // any tiling and thread count.
  constexpr int64_t kTileRows = 8, kTileCols = 256;
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows, col_tiles = (n + kTileCols - 1) / kTileCols;
  for (int64_t batch = 0; batch < batches; ++batch) {
    const Values A = pack_matrix(pool, a, batch, transpose_a, m, k);
    const Values B = pack_matrix(pool, b, batch, transpose_b, k, n);
    const int64_t c_batch = r == 3 ? batch * c.strides[0] : 0;
    const auto store_row = [&](int64_t i, int64_t j0, const double* acc, int64_t cols) {
      for (int64_t j = j0; j < j0 + cols; ++j) {
        const int64_t offset = c_batch + i * c.strides[r - 2] + j * c.strides[r - 1];
        double value = alpha * acc[j - j0] + bias_row[static_cast<size_t>(j)];
        if (beta != 0 || planted_defect() == Defect::gemm_reads_c) value += beta * load_element(c, offset);
        store_element(c, offset, value);
      }
    };
    if (planted_defect() != Defect::none) {
      pool.parallel_for(m, 8, [&](int64_t row_begin, int64_t row_end) {
        Values acc(static_cast<size_t>(n));
        for (int64_t i = row_begin; i < row_end; ++i) {
          std::fill(acc.begin(), acc.end(), 0.0);
          planted_accumulate(acc, A, B, i, k, n, a.dtype);
          store_row(i, 0, acc.data(), n);
        }
      });
      continue;
    }
    pool.parallel_for(row_tiles * col_tiles, 1, [&](int64_t tile_begin, int64_t tile_end) {
      Values acc(static_cast<size_t>(kTileRows * kTileCols));  // on a cache line, as A and B
      for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
        const int64_t i0 = tile / col_tiles * kTileRows, j0 = tile % col_tiles * kTileCols;
        const int64_t rows = std::min(kTileRows, m - i0), cols = std::min(kTileCols, n - j0);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = 0; p < k; ++p) {
          const double* brow = &B[static_cast<size_t>(p * n + j0)];
          for (int64_t row = 0; row < rows; ++row) {
            const double aip = A[static_cast<size_t>((i0 + row) * k + p)];
            double* out = &acc[static_cast<size_t>(row * kTileCols)];
            for (int64_t j = 0; j < cols; ++j) out[j] += aip * brow[j];
          }
        }
        for (int64_t row = 0; row < rows; ++row)
          store_row(i0 + row, j0, &acc[static_cast<size_t>(row * kTileCols)], cols);
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
