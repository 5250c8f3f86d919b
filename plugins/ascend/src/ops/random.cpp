// dropout, uniform and normal on the ABI's Philox streams (plugins/common/composed/random.cpp):
// aclnn's generators (DropoutGenMask, the Inplace{Uniform,Normal} family) document neither their
// algorithm nor their counter layout, so the numbers are drawn on the host and uploaded through
// page-locked staging; aclnn applies them.
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

H2_COMPOSED_OP(AclMath, uniform, H2_UniformArgs)
H2_COMPOSED_OP(AclMath, normal, H2_NormalArgs)
H2_COMPOSED_OP(AclMath, dropout, H2_DropoutArgs)

}  // namespace h2::ascend
