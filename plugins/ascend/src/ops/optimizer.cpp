// adamw, grad_norm, clip_by_norm and unscale: composed on aclnn's elementwise operators and
// reductions (plugins/common/composed/optimizer.cpp). AdamW is composed although aclnn has
// aclnnApplyAdamWV2: that operator takes beta1 and beta2 as FLOAT, and 1 - beta2 formed from FLOAT
// 0.999 is off by 1.3e-5 relative (tried: with aclnnApplyAdamWV2, 15 of 21 AdamW cases fail).
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

H2_COMPOSED_OP(AclMath, adamw, H2_AdamWArgs)
H2_COMPOSED_OP(AclMath, grad_norm, H2_GradNormArgs)
H2_COMPOSED_OP(AclMath, clip_by_norm, H2_ClipByNormArgs)
H2_COMPOSED_OP(AclMath, unscale, H2_UnscaleArgs)

}  // namespace h2::ascend
