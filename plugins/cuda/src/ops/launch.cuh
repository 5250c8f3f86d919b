// What every operator slot of the CUDA plugin does around its kernels: resolve the stream, make its
// device current, launch on its CUDA stream, check the launch, and map failures to a status plus the
// thread's last error. Also stream-ordered scratch memory and the device-side record of errors that
// depend on data.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "../cuda_error.hpp"
#include "../runtime.hpp"
#include "view.cuh"

namespace h2::cuda {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535));
}

struct OpLaunch {
  const char* op;
  std::shared_ptr<Stream> stream;
  cudaStream_t cuda;
  DeviceError* error;

  // Checks the launch that was just made (bad configurations fail here, not at synchronize).
  void check_launch(const char* kernel) const {
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess)
      fail(status_of(status), std::string(op) + ": launching " + kernel + ": " + cudaGetErrorString(status));
  }
};

template <typename Body>
H2_Status run_op(const char* op, H2_Stream* stream, const void* args, Body&& body) noexcept {
  return guarded(op, [&] {
    if (args == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, std::string(op) + ": args is NULL");
    std::shared_ptr<Stream> s = runtime().stream(stream);
    use_device(s->device);
    OpLaunch launch{op, s, s->stream, s->error};
    try {
      body(launch);
    } catch (const h2::plugin::PluginError& e) {
      throw h2::plugin::PluginError(e.status(), std::string(op) + ": " + e.what());
    }
  });
}

// Scratch device memory ordered on the op's stream: allocated before the kernels that use it and
// freed after them, so it is reused without any synchronisation (cudaMallocAsync's pool).
class Scratch {
 public:
  Scratch(const OpLaunch& launch, size_t bytes) : stream_(launch.cuda) {
    if (bytes == 0) bytes = 1;
    H2_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream_));
  }
  ~Scratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// Records the first data-dependent error of a stream (the runtime reads it at synchronize).
__device__ __forceinline__ void report_index_error(DeviceError* error, int op, int dim, long long value,
                                                   long long limit) {
  if (atomicCAS(&error->code, 0, op) == 0) {
    error->dim = dim;
    error->value = value;
    error->limit = limit;
  }
}

// The contiguous [rows, cols] layout most row-wise kernels work on: `row_offset` turns a row number
// into the offset of its first element for a tensor whose last dimension is the row.
__device__ __forceinline__ int64_t row_offset(const View& v, int64_t row) {
  int64_t offset = 0;
  for (int d = v.rank - 2; d >= 0; --d) {
    const int64_t n = v.shape[d];
    offset += (row % n) * v.strides[d];
    row /= n;
  }
  return offset;
}

__device__ __forceinline__ int64_t col_stride(const View& v) {
  return v.rank == 0 ? 1 : v.strides[v.rank - 1];
}

// Sum of `value` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// The order is fixed, so results are bit-identical from run to run.
__device__ __forceinline__ float block_sum(float value, float* shared) {
  for (int o = 16; o > 0; o >>= 1) value += __shfl_xor_sync(0xffffffffu, value, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < warps; ++w) total += shared[w];
  return total;
}

__device__ __forceinline__ float block_max(float value, float* shared) {
  for (int o = 16; o > 0; o >>= 1) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  float total = shared[0];
  for (int w = 1; w < warps; ++w) total = fmaxf(total, shared[w]);
  return total;
}

// Rows of a tensor without its last dimension, and the last dimension's size.
inline int64_t rows_of(const H2_Tensor& t) {
  int64_t rows = 1;
  for (uint32_t d = 0; d + 1 < t.rank; ++d) rows *= t.shape[d];
  return rows;
}
inline int64_t cols_of(const H2_Tensor& t) {
  return t.rank == 0 ? 1 : t.shape[t.rank - 1];
}

// A one-dimensional grid of `blocks` blocks, spread over y when more than CUDA's x limit allows.
inline dim3 grid_of_rows(int64_t rows) {
  const int64_t x = std::min<int64_t>(rows, 65535);
  return dim3(static_cast<unsigned>(std::max<int64_t>(x, 1)), static_cast<unsigned>((rows + 65534) / 65535));
}
__device__ __forceinline__ int64_t block_row() {
  return blockIdx.y * int64_t{gridDim.x} + blockIdx.x;
}

}  // namespace h2::cuda
