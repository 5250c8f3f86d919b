// The reference's operator table: every operator of ABI 1.1, for F64, F32, F16 and BF16 float
// tensors (or those H2_CPU_REFERENCE_OP_DTYPES names), any strides, deterministic.
#include "op_table.hpp"

#include "../plugin_state.hpp"
#include "common.hpp"

namespace h2::cpu_reference {

namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return guarded("capability", [&] {
    require(capability, "capability");
    if (device < 0 || device >= runtime().device_count())
      fail(H2_STATUS_INVALID_ARGUMENT, "device " + std::to_string(device) + " does not exist");
    check_capability_query(op, capability);
    capability->dtypes = runtime().op_dtypes();
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

}  // namespace h2::cpu_reference
