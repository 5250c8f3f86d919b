// Turning CUDA runtime and cuBLAS status codes into PluginErrors that name the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "plugin_error.hpp"

namespace h2::cuda {

using h2::plugin::fail;
using h2::plugin::guarded;
using h2::plugin::PluginError;
using h2::plugin::require;

// The ABI status a CUDA error means: a missing or too old driver is a missing vendor runtime,
// allocation failures are out of memory, anything else a device error.
inline H2_Status status_of(cudaError_t error) {
  switch (error) {
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver: return H2_STATUS_RUNTIME_MISSING;
    case cudaErrorNoDevice: return H2_STATUS_NO_DEVICE;
    case cudaErrorMemoryAllocation: return H2_STATUS_OUT_OF_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle: return H2_STATUS_INVALID_ARGUMENT;
    default: return H2_STATUS_DEVICE_ERROR;
  }
}

inline void check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call does not see it
  fail(status_of(error), std::string(call) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

inline void check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(status == CUBLAS_STATUS_ALLOC_FAILED ? H2_STATUS_OUT_OF_MEMORY : H2_STATUS_DEVICE_ERROR,
       std::string(call) + ": " + cublasGetStatusName(status) + ": " + cublasGetStatusString(status));
}

}  // namespace h2::cuda

// CUDA_CHECK(cudaMemsetAsync(...)) names the call in the error.
#define H2_CUDA_CHECK(expr) ::h2::cuda::check((expr), #expr)
