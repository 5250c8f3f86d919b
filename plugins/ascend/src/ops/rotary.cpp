// rotary composed on aclnn's elementwise operators from host cos/sin tables
// (plugins/common/composed/rotary.cpp).
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

H2_Status op_rotary(H2_Stream* handle, const H2_RotaryArgs* args) {
  return run_composed("rotary", handle, args, h2::plugin::composed::rotary);
}

}  // namespace h2::ascend
