// adamw, grad_norm, clip_by_norm and unscale: composed on aclnn's elementwise operators and
// reductions (plugins/common/composed/optimizer.cpp). AdamW is composed although aclnn has
// aclnnApplyAdamWV2: that operator takes beta1 and beta2 as FLOAT, and 1 - beta2 formed from FLOAT
// 0.999 is off by 1.3e-5 relative (tried: with aclnnApplyAdamWV2, 15 of 21 AdamW cases fail).
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

namespace composed = h2::plugin::composed;

H2_Status op_adamw(H2_Stream* handle, const H2_AdamWArgs* args) {
  return run_composed("adamw", handle, args, composed::adamw);
}

H2_Status op_grad_norm(H2_Stream* handle, const H2_GradNormArgs* args) {
  return run_composed("grad_norm", handle, args, composed::grad_norm);
}

H2_Status op_clip_by_norm(H2_Stream* handle, const H2_ClipByNormArgs* args) {
  return run_composed("clip_by_norm", handle, args, composed::clip_by_norm);
}

H2_Status op_unscale(H2_Stream* handle, const H2_UnscaleArgs* args) {
  return run_composed("unscale", handle, args, composed::unscale);
}

}  // namespace h2::ascend
