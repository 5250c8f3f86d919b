// The CUDA plugin's operator table: every operator of ABI 1.1 for F32, F16 and (from sm_80) BF16
// float tensors, any strides, deterministic (fixed reduction orders, no float atomics; cuBLAS with a
// per-stream workspace is run-to-run reproducible on one GPU model).
#include "op_table.hpp"

#include <cuda_runtime.h>

#include "../cuda_error.hpp"
#include "../runtime.hpp"

namespace h2::cuda {

namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return guarded("capability", [&] {
    h2::plugin::require(capability, "capability");
    runtime().check_device(device);
    h2::plugin::check_capability_query(op, capability);
    int major = 0;
    H2_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    capability->dtypes = (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (major >= 8 ? (1u << H2_DTYPE_BF16) : 0u);
    capability->strided_tensors = 1;
    capability->deterministic = 1;
  });
}

}  // namespace

// clang-format off
const H2_OpTable kOpTable = {
    .struct_size = sizeof(H2_OpTable),
    .capability = capability,
    H2_OPS(H2_PLUGIN_OP_TABLE_ENTRY)  // every operator slot, .gemm = op_gemm, ...
};
// clang-format on

}  // namespace h2::cuda
