/*
 * The operators of H2's plugin C ABI, listed once.
 *
 * Part of the ABI: plugin_abi.h includes this header and generates from the list the H2_Op enum, the
 * operator slots of H2_OpTable and the guards that keep each slot at its place; the core generates
 * its operator names from it, the plugins of this repository their slot declarations and tables,
 * and the conformance suite checks that every operator listed has cases and a tolerance. Adding an
 * operator is one line here (at the end: ids and slots are append-only), its argument struct with
 * its documentation in plugin_abi.h, and then whatever those checks ask for.
 *
 * H2_OPS(X) calls X(name, NAME, id, Args, minor) for every operator in id order:
 *   name   the slot's name in H2_OpTable and the operator's name everywhere ("gemm")
 *   NAME   the suffix of its H2_Op value (H2_OP_GEMM)
 *   id     its H2_Op value: 1, 2, ... in this order, never reused
 *   Args   its argument struct, declared in plugin_abi.h
 *   minor  the ABI 1.x minor that added it
 * Pure preprocessor text (C11 and C++), nothing else.
 */
#ifndef H2_PLUGIN_OPS_H
#define H2_PLUGIN_OPS_H

/* clang-format off */
#define H2_OPS(X) \
  X(gemm,                   GEMM,                    1, H2_GemmArgs,                  1) \
  X(softmax,                SOFTMAX,                 2, H2_SoftmaxArgs,               1) \
  X(softmax_backward,       SOFTMAX_BACKWARD,        3, H2_SoftmaxBackwardArgs,       1) \
  X(layer_norm,             LAYER_NORM,              4, H2_LayerNormArgs,             1) \
  X(layer_norm_backward,    LAYER_NORM_BACKWARD,     5, H2_LayerNormBackwardArgs,     1) \
  X(rms_norm,               RMS_NORM,                6, H2_RmsNormArgs,               1) \
  X(rms_norm_backward,      RMS_NORM_BACKWARD,       7, H2_RmsNormBackwardArgs,       1) \
  X(gelu,                   GELU,                    8, H2_GeluArgs,                  1) \
  X(gelu_backward,          GELU_BACKWARD,           9, H2_GeluBackwardArgs,          1) \
  X(silu,                   SILU,                   10, H2_SiluArgs,                  1) \
  X(silu_backward,          SILU_BACKWARD,          11, H2_SiluBackwardArgs,          1) \
  X(swiglu,                 SWIGLU,                 12, H2_SwigluArgs,                1) \
  X(swiglu_backward,        SWIGLU_BACKWARD,        13, H2_SwigluBackwardArgs,        1) \
  X(embedding,              EMBEDDING,              14, H2_EmbeddingArgs,             1) \
  X(embedding_backward,     EMBEDDING_BACKWARD,     15, H2_EmbeddingBackwardArgs,     1) \
  X(rotary,                 ROTARY,                 16, H2_RotaryArgs,                1) \
  X(cross_entropy,          CROSS_ENTROPY,          17, H2_CrossEntropyArgs,          1) \
  X(cross_entropy_backward, CROSS_ENTROPY_BACKWARD, 18, H2_CrossEntropyBackwardArgs,  1) \
  X(attention,              ATTENTION,              19, H2_AttentionArgs,             1) \
  X(attention_backward,     ATTENTION_BACKWARD,     20, H2_AttentionBackwardArgs,     1) \
  X(dropout,                DROPOUT,                21, H2_DropoutArgs,               1) \
  X(uniform,                UNIFORM,                22, H2_UniformArgs,               1) \
  X(normal,                 NORMAL,                 23, H2_NormalArgs,                1) \
  X(adamw,                  ADAMW,                  24, H2_AdamWArgs,                 1) \
  X(grad_norm,              GRAD_NORM,              25, H2_GradNormArgs,              1) \
  X(clip_by_norm,           CLIP_BY_NORM,           26, H2_ClipByNormArgs,            1) \
  X(unscale,                UNSCALE,                27, H2_UnscaleArgs,               1) \
  X(binary,                 BINARY,                 28, H2_BinaryArgs,                1) \
  X(binary_scalar,          BINARY_SCALAR,          29, H2_BinaryScalarArgs,          1) \
  X(unary,                  UNARY,                  30, H2_UnaryArgs,                 1) \
  X(reduce,                 REDUCE,                 31, H2_ReduceArgs,                1) \
  X(copy,                   COPY,                   32, H2_CopyArgs,                  1) \
  X(fill,                   FILL,                   33, H2_FillArgs,                  1) \
  X(arange,                 ARANGE,                 34, H2_ArangeArgs,                1) \
  X(where,                  WHERE,                  35, H2_WhereArgs,                 1) \
  X(masked_fill,            MASKED_FILL,            36, H2_MaskedFillArgs,            1) \
  X(index_select,           INDEX_SELECT,           37, H2_IndexSelectArgs,           1) \
  X(gather,                 GATHER,                 38, H2_GatherArgs,                1) \
  X(scatter_add,            SCATTER_ADD,            39, H2_ScatterAddArgs,            1)
/* clang-format on */

#endif /* H2_PLUGIN_OPS_H */
