// The operators CNNL lacks or cannot do exactly as the ABI says, composed on CNNL
// (plugins/common/composed): AdamW and the gradient utilities (CNNL has no fused AdamW), cross-entropy
// (CNNL's NLL path does not return the log-sum-exp the ABI does), dropout, uniform and normal (CNNL's
// Philox generators use their own counter layout, cnnlRandGetSimulateThreadNum-dependent, not the
// ABI's), rotary, and attention (CNNL's fused attention takes packed variable-length sequences).
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

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

H2_Status op_cross_entropy(H2_Stream* handle, const H2_CrossEntropyArgs* args) {
  return run_composed("cross_entropy", handle, args, composed::cross_entropy);
}

H2_Status op_cross_entropy_backward(H2_Stream* handle, const H2_CrossEntropyBackwardArgs* args) {
  return run_composed("cross_entropy_backward", handle, args, composed::cross_entropy_backward);
}

H2_Status op_dropout(H2_Stream* handle, const H2_DropoutArgs* args) {
  return run_composed("dropout", handle, args, composed::dropout);
}

H2_Status op_uniform(H2_Stream* handle, const H2_UniformArgs* args) {
  return run_composed("uniform", handle, args, composed::uniform);
}

H2_Status op_normal(H2_Stream* handle, const H2_NormalArgs* args) {
  return run_composed("normal", handle, args, composed::normal);
}

H2_Status op_rotary(H2_Stream* handle, const H2_RotaryArgs* args) {
  return run_composed("rotary", handle, args, composed::rotary);
}

H2_Status op_attention(H2_Stream* handle, const H2_AttentionArgs* args) {
  return run_composed("attention", handle, args, composed::attention);
}

H2_Status op_attention_backward(H2_Stream* handle, const H2_AttentionBackwardArgs* args) {
  return run_composed("attention_backward", handle, args, composed::attention_backward);
}

}  // namespace h2::mlu
