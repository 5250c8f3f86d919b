// The MLU plugin's operator table: every operator of the ABI, each mapped onto CNNL operators (one
// where CNNL has it, composed where it does not or cannot do it exactly as the ABI says), for FLOAT,
// HALF and BFLOAT16, any strides, deterministic (the plugin asks only for reductions that sum in a
// fixed order; the emulated runtime always does).
#include "op_table.hpp"

#include "../runtime.hpp"

namespace h2::mlu {
namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return h2::plugin::guarded("capability", [&] {
    h2::plugin::require(capability, "capability");
    runtime().check_device(device);
    h2::plugin::check_capability_query(op, capability);
    capability->dtypes = (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16);
    capability->strided_tensors = 1;
    capability->deterministic = 1;
  });
}

}  // namespace

const H2_OpTable kOpTable = {
    .struct_size = sizeof(H2_OpTable),
    .capability = capability,
    H2_OPS(H2_PLUGIN_OP_TABLE_ENTRY)  // every operator slot, .gemm = op_gemm, ...
};

}  // namespace h2::mlu
