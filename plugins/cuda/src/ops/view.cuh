// Tensors as CUDA kernels see them: an H2_Tensor passed by value, with device functions that turn a
// logical (row-major) element index into a memory offset and that load and store any float dtype in
// F32 registers. One kernel then serves F32, F16 and BF16 and any strides; the dtype branch is
// uniform across a launch, so it costs no divergence.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "h2/plugin_abi.h"

namespace h2::cuda {

struct View {
  char* data;
  uint32_t dtype;
  int32_t rank;
  int32_t element_size;
  int32_t contiguous;  // 1: offset == logical index
  int64_t shape[H2_MAX_RANK];
  int64_t strides[H2_MAX_RANK];
};

// Host side: the view of `t` (an absent optional tensor gives data == nullptr).
View make_view(const H2_Tensor& t);
int64_t numel(const H2_Tensor& t);
int element_size(uint32_t dtype);

__device__ __forceinline__ int64_t offset_of(const View& v, int64_t index) {
  if (v.contiguous) return index;
  int64_t offset = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    const int64_t n = v.shape[d];
    offset += (index % n) * v.strides[d];
    index /= n;
  }
  return offset;
}

__device__ __forceinline__ float load(const View& v, int64_t offset) {
  switch (v.dtype) {
    case H2_DTYPE_F16: return __half2float(reinterpret_cast<const __half*>(v.data)[offset]);
    case H2_DTYPE_BF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(v.data)[offset]);
    default: return reinterpret_cast<const float*>(v.data)[offset];
  }
}

__device__ __forceinline__ void store(const View& v, int64_t offset, float value) {
  switch (v.dtype) {
    case H2_DTYPE_F16: reinterpret_cast<__half*>(v.data)[offset] = __float2half_rn(value); break;
    case H2_DTYPE_BF16: reinterpret_cast<__nv_bfloat16*>(v.data)[offset] = __float2bfloat16_rn(value); break;
    default: reinterpret_cast<float*>(v.data)[offset] = value;
  }
}

// Any dtype through double, for copies between integer and float tensors.
__device__ __forceinline__ double load_any(const View& v, int64_t offset) {
  switch (v.dtype) {
    case H2_DTYPE_F32: return reinterpret_cast<const float*>(v.data)[offset];
    case H2_DTYPE_F16: return __half2float(reinterpret_cast<const __half*>(v.data)[offset]);
    case H2_DTYPE_BF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(v.data)[offset]);
    case H2_DTYPE_F64: return reinterpret_cast<const double*>(v.data)[offset];
    case H2_DTYPE_I32: return reinterpret_cast<const int32_t*>(v.data)[offset];
    case H2_DTYPE_I64: return static_cast<double>(reinterpret_cast<const int64_t*>(v.data)[offset]);
    case H2_DTYPE_U8: return reinterpret_cast<const uint8_t*>(v.data)[offset];
    case H2_DTYPE_BOOL: return reinterpret_cast<const uint8_t*>(v.data)[offset] != 0 ? 1.0 : 0.0;
    default: return 0;
  }
}

template <typename Int>
__device__ __forceinline__ Int saturate(double x, double low, double high) {
  if (x != x) return 0;  // NaN
  x = trunc(x);
  if (x <= low) return static_cast<Int>(low);
  if (x >= high) return static_cast<Int>(high);
  return static_cast<Int>(x);
}

// One rounding from double for every float dtype (as the reference); truncation toward zero with
// saturation for integers.
__device__ __forceinline__ void store_any(const View& v, int64_t offset, double value) {
  switch (v.dtype) {
    case H2_DTYPE_F32: reinterpret_cast<float*>(v.data)[offset] = __double2float_rn(value); break;
    case H2_DTYPE_F16: reinterpret_cast<__half*>(v.data)[offset] = __double2half(value); break;
    case H2_DTYPE_BF16: reinterpret_cast<__nv_bfloat16*>(v.data)[offset] = __double2bfloat16(value); break;
    case H2_DTYPE_F64: reinterpret_cast<double*>(v.data)[offset] = value; break;
    case H2_DTYPE_I32:
      reinterpret_cast<int32_t*>(v.data)[offset] = saturate<int32_t>(value, -2147483648.0, 2147483647.0);
      break;
    case H2_DTYPE_I64:
      // 2^63 is not an int64; anything at or above it saturates.
      reinterpret_cast<int64_t*>(v.data)[offset] = value != value                   ? 0
                                                   : value >= 9223372036854775808.0 ? INT64_MAX
                                                   : value <= -9223372036854775808.0
                                                       ? INT64_MIN
                                                       : static_cast<int64_t>(trunc(value));
      break;
    case H2_DTYPE_U8: reinterpret_cast<uint8_t*>(v.data)[offset] = saturate<uint8_t>(value, 0.0, 255.0); break;
    case H2_DTYPE_BOOL: reinterpret_cast<uint8_t*>(v.data)[offset] = value != 0 ? 1 : 0; break;
    default: break;
  }
}

__device__ __forceinline__ int64_t load_index(const View& v, int64_t offset) {
  return v.dtype == H2_DTYPE_I32 ? reinterpret_cast<const int32_t*>(v.data)[offset]
                                 : reinterpret_cast<const int64_t*>(v.data)[offset];
}

__device__ __forceinline__ bool load_flag(const View& v, int64_t offset) {
  return reinterpret_cast<const uint8_t*>(v.data)[offset] != 0;
}

// A grid-stride loop over `n` logical elements.
#define H2_FOR_EACH_ELEMENT(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

}  // namespace h2::cuda
