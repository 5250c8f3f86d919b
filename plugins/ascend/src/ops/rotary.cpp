// rotary composed on aclnn's elementwise operators from host cos/sin tables
// (plugins/common/composed/rotary.cpp).
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

H2_COMPOSED_OP(AclMath, rotary, H2_RotaryArgs)

}  // namespace h2::ascend
