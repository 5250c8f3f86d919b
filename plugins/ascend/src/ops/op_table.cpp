// The Ascend plugin's operator table. The operators are being mapped onto aclnn (issue 29); until an
// operator is, its slot is NULL and the capability query says it is unsupported, so the core names
// the missing operator instead of computing anything.
#include "op_table.hpp"

#include "../runtime.hpp"
#include "op_slots.hpp"

namespace h2::ascend {
namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return h2::plugin::guarded("capability", [&] {
    h2::plugin::require(capability, "capability");
    runtime().check_device(device);
    h2::plugin::check_capability_query(op, capability);
    h2::plugin::fail(H2_STATUS_UNSUPPORTED,
                     std::string("the Ascend plugin does not provide ") + h2::plugin::op_name(op) + " yet");
  });
}

}  // namespace

const H2_OpTable kOpTable = {
    .struct_size = sizeof(H2_OpTable),
    .capability = capability,
};

}  // namespace h2::ascend
