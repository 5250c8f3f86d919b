// The operators CNNL lacks or cannot do exactly as the ABI says, composed on CNNL
// (plugins/common/composed): AdamW and the gradient utilities (CNNL has no fused AdamW), cross-entropy
// (CNNL's NLL path does not return the log-sum-exp the ABI does), dropout, uniform and normal (CNNL's
// Philox generators use their own counter layout, cnnlRandGetSimulateThreadNum-dependent, not the
// ABI's), rotary, and attention (CNNL's fused attention takes packed variable-length sequences).
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

H2_COMPOSED_OP(CnnlMath, adamw, H2_AdamWArgs)
H2_COMPOSED_OP(CnnlMath, grad_norm, H2_GradNormArgs)
H2_COMPOSED_OP(CnnlMath, clip_by_norm, H2_ClipByNormArgs)
H2_COMPOSED_OP(CnnlMath, unscale, H2_UnscaleArgs)
H2_COMPOSED_OP(CnnlMath, cross_entropy, H2_CrossEntropyArgs)
H2_COMPOSED_OP(CnnlMath, cross_entropy_backward, H2_CrossEntropyBackwardArgs)
H2_COMPOSED_OP(CnnlMath, dropout, H2_DropoutArgs)
H2_COMPOSED_OP(CnnlMath, uniform, H2_UniformArgs)
H2_COMPOSED_OP(CnnlMath, normal, H2_NormalArgs)
H2_COMPOSED_OP(CnnlMath, rotary, H2_RotaryArgs)
H2_COMPOSED_OP(CnnlMath, attention, H2_AttentionArgs)
H2_COMPOSED_OP(CnnlMath, attention_backward, H2_AttentionBackwardArgs)

}  // namespace h2::mlu
