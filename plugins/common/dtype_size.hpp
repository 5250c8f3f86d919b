// Bytes per element of each H2_DType, the one table every plugin of this repository uses (also in
// CUDA device code).
#pragma once

#include <cstddef>
#include <cstdint>

#include "h2/plugin_abi.h"

#if defined(__CUDACC__)
#define H2_DTYPE_HOST_DEVICE __host__ __device__
#else
#define H2_DTYPE_HOST_DEVICE
#endif

namespace h2::plugin {

// 0 for a value that names no dtype.
H2_DTYPE_HOST_DEVICE constexpr size_t dtype_size(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F64:
    case H2_DTYPE_I64: return 8;
    case H2_DTYPE_F32:
    case H2_DTYPE_I32: return 4;
    case H2_DTYPE_F16:
    case H2_DTYPE_BF16: return 2;
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

}  // namespace h2::plugin
