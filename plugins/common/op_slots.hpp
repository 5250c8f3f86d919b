// The operator slots of ABI 1.1 in the order of H2_OpTable (and H2_Op), as an X-macro, so every
// plugin of this repository declares its `op_<name>` functions and fills its table from one list:
//   H2_PLUGIN_OPS(H2_PLUGIN_DECLARE_OP)            declares H2_Status op_gemm(H2_Stream*, const H2_GemmArgs*); ...
//   { ..., H2_PLUGIN_OPS(H2_PLUGIN_OP_TABLE_ENTRY) }  fills .gemm = op_gemm, ... in an H2_OpTable
#pragma once

#include <string>

#include "h2/plugin_abi.h"
#include "plugin_error.hpp"

// clang-format off
#define H2_PLUGIN_OPS(X) \
  X(gemm, H2_GemmArgs) \
  X(softmax, H2_SoftmaxArgs) \
  X(softmax_backward, H2_SoftmaxBackwardArgs) \
  X(layer_norm, H2_LayerNormArgs) \
  X(layer_norm_backward, H2_LayerNormBackwardArgs) \
  X(rms_norm, H2_RmsNormArgs) \
  X(rms_norm_backward, H2_RmsNormBackwardArgs) \
  X(gelu, H2_GeluArgs) \
  X(gelu_backward, H2_GeluBackwardArgs) \
  X(silu, H2_SiluArgs) \
  X(silu_backward, H2_SiluBackwardArgs) \
  X(swiglu, H2_SwigluArgs) \
  X(swiglu_backward, H2_SwigluBackwardArgs) \
  X(embedding, H2_EmbeddingArgs) \
  X(embedding_backward, H2_EmbeddingBackwardArgs) \
  X(rotary, H2_RotaryArgs) \
  X(cross_entropy, H2_CrossEntropyArgs) \
  X(cross_entropy_backward, H2_CrossEntropyBackwardArgs) \
  X(attention, H2_AttentionArgs) \
  X(attention_backward, H2_AttentionBackwardArgs) \
  X(dropout, H2_DropoutArgs) \
  X(uniform, H2_UniformArgs) \
  X(normal, H2_NormalArgs) \
  X(adamw, H2_AdamWArgs) \
  X(grad_norm, H2_GradNormArgs) \
  X(clip_by_norm, H2_ClipByNormArgs) \
  X(unscale, H2_UnscaleArgs) \
  X(binary, H2_BinaryArgs) \
  X(binary_scalar, H2_BinaryScalarArgs) \
  X(unary, H2_UnaryArgs) \
  X(reduce, H2_ReduceArgs) \
  X(copy, H2_CopyArgs) \
  X(fill, H2_FillArgs) \
  X(arange, H2_ArangeArgs) \
  X(where, H2_WhereArgs) \
  X(masked_fill, H2_MaskedFillArgs) \
  X(index_select, H2_IndexSelectArgs) \
  X(gather, H2_GatherArgs) \
  X(scatter_add, H2_ScatterAddArgs)
// clang-format on

#define H2_PLUGIN_DECLARE_OP(name, Args) H2_Status op_##name(H2_Stream* stream, const Args* args);
#define H2_PLUGIN_OP_TABLE_ENTRY(name, Args) .name = op_##name,

namespace h2::plugin {

// The checks every plugin's `capability` slot makes on its arguments before answering.
inline void check_capability_query(uint32_t op, const H2_OpCapability* capability) {
  require(capability, "capability");
  if (op < 1 || op > H2_OP_COUNT_1_1) fail(H2_STATUS_UNSUPPORTED, "unknown operator " + std::to_string(op));
  if (capability->struct_size < H2_OP_CAPABILITY_SIZE_1_1)
    fail(H2_STATUS_INVALID_ARGUMENT, "capability->struct_size is smaller than ABI 1.1's");
}

}  // namespace h2::plugin
