// The Ascend plugin's operator table (plugin_abi.h section 8) and the operators it provides, each
// defined in the file of its family.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::ascend {

extern const H2_OpTable kOpTable;

H2_Status op_gemm(H2_Stream* stream, const H2_GemmArgs* args);
H2_Status op_binary(H2_Stream* stream, const H2_BinaryArgs* args);
H2_Status op_binary_scalar(H2_Stream* stream, const H2_BinaryScalarArgs* args);
H2_Status op_unary(H2_Stream* stream, const H2_UnaryArgs* args);
H2_Status op_copy(H2_Stream* stream, const H2_CopyArgs* args);
H2_Status op_fill(H2_Stream* stream, const H2_FillArgs* args);
H2_Status op_where(H2_Stream* stream, const H2_WhereArgs* args);
H2_Status op_masked_fill(H2_Stream* stream, const H2_MaskedFillArgs* args);
H2_Status op_arange(H2_Stream* stream, const H2_ArangeArgs* args);
H2_Status op_reduce(H2_Stream* stream, const H2_ReduceArgs* args);
H2_Status op_gelu(H2_Stream* stream, const H2_GeluArgs* args);
H2_Status op_gelu_backward(H2_Stream* stream, const H2_GeluBackwardArgs* args);
H2_Status op_silu(H2_Stream* stream, const H2_SiluArgs* args);
H2_Status op_silu_backward(H2_Stream* stream, const H2_SiluBackwardArgs* args);
H2_Status op_swiglu(H2_Stream* stream, const H2_SwigluArgs* args);
H2_Status op_swiglu_backward(H2_Stream* stream, const H2_SwigluBackwardArgs* args);
H2_Status op_softmax(H2_Stream* stream, const H2_SoftmaxArgs* args);
H2_Status op_softmax_backward(H2_Stream* stream, const H2_SoftmaxBackwardArgs* args);
H2_Status op_layer_norm(H2_Stream* stream, const H2_LayerNormArgs* args);
H2_Status op_layer_norm_backward(H2_Stream* stream, const H2_LayerNormBackwardArgs* args);
H2_Status op_rms_norm(H2_Stream* stream, const H2_RmsNormArgs* args);
H2_Status op_rms_norm_backward(H2_Stream* stream, const H2_RmsNormBackwardArgs* args);
H2_Status op_embedding(H2_Stream* stream, const H2_EmbeddingArgs* args);
H2_Status op_embedding_backward(H2_Stream* stream, const H2_EmbeddingBackwardArgs* args);
H2_Status op_index_select(H2_Stream* stream, const H2_IndexSelectArgs* args);
H2_Status op_gather(H2_Stream* stream, const H2_GatherArgs* args);
H2_Status op_scatter_add(H2_Stream* stream, const H2_ScatterAddArgs* args);
H2_Status op_dropout(H2_Stream* stream, const H2_DropoutArgs* args);
H2_Status op_uniform(H2_Stream* stream, const H2_UniformArgs* args);
H2_Status op_normal(H2_Stream* stream, const H2_NormalArgs* args);
H2_Status op_adamw(H2_Stream* stream, const H2_AdamWArgs* args);
H2_Status op_grad_norm(H2_Stream* stream, const H2_GradNormArgs* args);
H2_Status op_clip_by_norm(H2_Stream* stream, const H2_ClipByNormArgs* args);
H2_Status op_unscale(H2_Stream* stream, const H2_UnscaleArgs* args);
H2_Status op_rotary(H2_Stream* stream, const H2_RotaryArgs* args);
H2_Status op_cross_entropy(H2_Stream* stream, const H2_CrossEntropyArgs* args);
H2_Status op_cross_entropy_backward(H2_Stream* stream, const H2_CrossEntropyBackwardArgs* args);
H2_Status op_attention(H2_Stream* stream, const H2_AttentionArgs* args);
H2_Status op_attention_backward(H2_Stream* stream, const H2_AttentionBackwardArgs* args);

}  // namespace h2::ascend
