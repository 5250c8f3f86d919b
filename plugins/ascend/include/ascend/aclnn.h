/*
 * The subset of aclnn (CANN's single-operator API: libnnopbase.so for descriptors and executors,
 * libopapi.so for the operators) that H2's Ascend plugin uses.
 *
 * Written for H2 from Huawei's public documentation of CANN 8.0.0: the aclnn API reference
 * (acl_meta.h's aclCreateTensor family, the two-phase call, aclnn return codes) and the operator
 * pages of aclnnInplaceCopy, aclnnInplaceFillScalar, aclnnAdd/Sub/Mul/Div, aclnnAdds/Subs/Muls/Divs,
 * aclnnMaximum/Minimum, aclnnPow*, aclnnClampMin/Max, aclnnExp/Log/Sqrt/Rsqrt/Neg/Reciprocal/Abs,
 * aclnnInplaceAddmm, aclnnBaddbmm, aclnnGtScalar, aclnnEqScalar, aclnnIsFinite, aclnnLogicalNot, aclnnSWhere,
 * aclnnInplaceMaskedFillScalar, aclnnArange, aclnnReduceSum, aclnnMean, aclnnAmax, aclnnMaxDim, aclnnGeluV2,
 * aclnnGeluBackwardV2, aclnnSilu, aclnnSiluBackward, aclnnIndexSelect, aclnnGather, aclnnScatterAdd, aclnnEmbedding,
 * aclnnEmbeddingDenseBackward, aclnnSoftmax, aclnnSoftmaxBackward, aclnnLayerNorm,
 * aclnnLayerNormBackward, aclnnRmsNorm, aclnnRmsNormGrad, aclnnFlashAttentionScore and
 * aclnnFlashAttentionScoreGrad. Declarations only, resolved by name at run time, and
 * implemented with the same signatures by the emulator (plugins/ascend/emulator).
 *
 * Every operator has two phases: aclnnXxxGetWorkspaceSize(inputs..., outputs..., &workspace_size,
 * &executor) checks the descriptors and plans the work without touching device memory; then
 * aclnnXxx(workspace, workspace_size, executor, stream) enqueues it on the stream. An executor runs
 * once and is then freed by the runtime; the workspace (device memory of at least workspace_size
 * bytes) must stay allocated until the work has run. Descriptors may be destroyed once the second
 * phase has returned.
 */
#ifndef H2_ASCEND_ACLNN_H
#define H2_ASCEND_ACLNN_H

#include <stdbool.h>
#include <stdint.h>

#include "acl_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus;
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000

/* acl_base.h's element types (the values aclCreateTensor takes). */
typedef enum aclDataType {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT64 = 9,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_BF16 = 27
} aclDataType;

typedef enum aclFormat { ACL_FORMAT_UNDEFINED = -1, ACL_FORMAT_ND = 2 } aclFormat;

/* cubeMathType of the matrix operators: how the Cube unit computes (Atlas A2, the 910B):
 * KEEP_DTYPE computes in the inputs' type (FP32 stays FP32); ALLOW_FP32_DOWN_PRECISION and USE_HF32
 * round FP32 inputs to HFLOAT32; USE_FP16 rounds to FP16 (not for BF16); USE_FP32_ADD keeps the
 * bias addition of FP16/BF16 matrix products in FP32. */
#define KEEP_DTYPE 0
#define ALLOW_FP32_DOWN_PRECISION 1
#define USE_FP16 2
#define USE_HF32 3
#define USE_FP32_ADD 4

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclOpExecutor aclOpExecutor;

/* ---- Descriptors (libnnopbase.so) ----
 * A tensor: the view (view_dims, strides and offset in elements) of storage that starts at `data`
 * (device memory, the start of an allocation or 32-byte aligned) and holds storage_dims elements.
 * The descriptor is owned by the caller until aclDestroyTensor; `data` is borrowed. */
typedef aclTensor* (*aclCreateTensorFn)(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                                        const int64_t* stride, int64_t offset, aclFormat format,
                                        const int64_t* storage_dims, uint64_t storage_dims_num, void* data);
typedef aclnnStatus (*aclDestroyTensorFn)(const aclTensor* tensor);
/* A host scalar: `value` points to one element of `data_type`, copied by the call. */
typedef aclScalar* (*aclCreateScalarFn)(void* value, aclDataType data_type);
typedef aclnnStatus (*aclDestroyScalarFn)(const aclScalar* scalar);
/* A host array of `size` int64 values (dimensions), copied by the call. */
typedef aclIntArray* (*aclCreateIntArrayFn)(const int64_t* value, uint64_t size);
typedef aclnnStatus (*aclDestroyIntArrayFn)(const aclIntArray* array);
typedef aclBoolArray* (*aclCreateBoolArrayFn)(const bool* value, uint64_t size);
typedef aclnnStatus (*aclDestroyBoolArrayFn)(const aclBoolArray* array);

/* ---- Operators (libopapi.so): phase 2 has the same signature for every operator ---- */
typedef aclnnStatus (*aclnnRunFn)(void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                                  aclrtStream stream);

/* selfRef = src converted to selfRef's type, any strides, src broadcast to selfRef's shape. */
typedef aclnnStatus (*aclnnInplaceCopyGetWorkspaceSizeFn)(aclTensor* self_ref, const aclTensor* src,
                                                          uint64_t* workspace_size, aclOpExecutor** executor);
/* selfRef = value. */
typedef aclnnStatus (*aclnnInplaceFillScalarGetWorkspaceSizeFn)(aclTensor* self_ref, const aclScalar* value,
                                                                uint64_t* workspace_size, aclOpExecutor** executor);
/* out = self + alpha * other, out = self - alpha * other (inputs broadcast to out). */
typedef aclnnStatus (*aclnnAddGetWorkspaceSizeFn)(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                                  aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor);
typedef aclnnAddGetWorkspaceSizeFn aclnnSubGetWorkspaceSizeFn;
/* out = self (op) other: Mul, Div, Maximum, Minimum, PowTensorTensor. */
typedef aclnnStatus (*aclnnBinaryGetWorkspaceSizeFn)(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                     uint64_t* workspace_size, aclOpExecutor** executor);
typedef aclnnBinaryGetWorkspaceSizeFn aclnnMulGetWorkspaceSizeFn;
typedef aclnnBinaryGetWorkspaceSizeFn aclnnDivGetWorkspaceSizeFn;
typedef aclnnBinaryGetWorkspaceSizeFn aclnnMaximumGetWorkspaceSizeFn;
typedef aclnnBinaryGetWorkspaceSizeFn aclnnMinimumGetWorkspaceSizeFn;
typedef aclnnBinaryGetWorkspaceSizeFn aclnnPowTensorTensorGetWorkspaceSizeFn;
/* out = self + alpha * other, self - alpha * other, other - alpha * self (Rsubs) with a scalar other. */
typedef aclnnStatus (*aclnnAddsGetWorkspaceSizeFn)(const aclTensor* self, const aclScalar* other,
                                                   const aclScalar* alpha, aclTensor* out, uint64_t* workspace_size,
                                                   aclOpExecutor** executor);
typedef aclnnAddsGetWorkspaceSizeFn aclnnSubsGetWorkspaceSizeFn;
typedef aclnnAddsGetWorkspaceSizeFn aclnnRsubsGetWorkspaceSizeFn;
/* out = self (op) scalar: Muls, Divs, PowTensorScalar, ClampMin (max), ClampMax (min). */
typedef aclnnStatus (*aclnnScalarGetWorkspaceSizeFn)(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                                     uint64_t* workspace_size, aclOpExecutor** executor);
typedef aclnnScalarGetWorkspaceSizeFn aclnnMulsGetWorkspaceSizeFn;
typedef aclnnScalarGetWorkspaceSizeFn aclnnDivsGetWorkspaceSizeFn;
typedef aclnnScalarGetWorkspaceSizeFn aclnnPowTensorScalarGetWorkspaceSizeFn;
typedef aclnnScalarGetWorkspaceSizeFn aclnnClampMinGetWorkspaceSizeFn;
typedef aclnnScalarGetWorkspaceSizeFn aclnnClampMaxGetWorkspaceSizeFn;
/* out = scalar ^ exponent. */
typedef aclnnStatus (*aclnnPowScalarTensorGetWorkspaceSizeFn)(const aclScalar* self, const aclTensor* exponent,
                                                              aclTensor* out, uint64_t* workspace_size,
                                                              aclOpExecutor** executor);
/* out = f(self): Exp, Log, Sqrt, Rsqrt, Neg, Reciprocal. */
typedef aclnnStatus (*aclnnUnaryGetWorkspaceSizeFn)(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                                    aclOpExecutor** executor);
typedef aclnnUnaryGetWorkspaceSizeFn aclnnExpGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnLogGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnSqrtGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnRsqrtGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnNegGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnReciprocalGetWorkspaceSizeFn;
/* selfRef = beta * selfRef + alpha * (mat1 @ mat2); 2-D, any strides (a transpose is a view). With
 * beta == 0 selfRef is not read. */
typedef aclnnStatus (*aclnnInplaceAddmmGetWorkspaceSizeFn)(const aclTensor* self_ref, const aclTensor* mat1,
                                                           const aclTensor* mat2, const aclScalar* beta,
                                                           const aclScalar* alpha, int8_t cube_math_type,
                                                           uint64_t* workspace_size, aclOpExecutor** executor);
/* out = beta * self + alpha * (batch1 @ batch2); 3-D, batch dimensions of 1 broadcast. With beta == 0
 * self is not read. */
typedef aclnnStatus (*aclnnBaddbmmGetWorkspaceSizeFn)(const aclTensor* self, const aclTensor* batch1,
                                                      const aclTensor* batch2, const aclScalar* beta,
                                                      const aclScalar* alpha, aclTensor* out, int8_t cube_math_type,
                                                      uint64_t* workspace_size, aclOpExecutor** executor);

/* out = condition ? self : other (condition BOOL; all broadcast to out). */
typedef aclnnStatus (*aclnnSWhereGetWorkspaceSizeFn)(const aclTensor* condition, const aclTensor* self,
                                                     const aclTensor* other, aclTensor* out, uint64_t* workspace_size,
                                                     aclOpExecutor** executor);
/* selfRef = mask ? value : selfRef (mask BOOL, broadcast to selfRef). */
typedef aclnnStatus (*aclnnInplaceMaskedFillScalarGetWorkspaceSizeFn)(aclTensor* self_ref, const aclTensor* mask,
                                                                      const aclScalar* value, uint64_t* workspace_size,
                                                                      aclOpExecutor** executor);
/* out (BOOL) = self > other, self == other. */
typedef aclnnScalarGetWorkspaceSizeFn aclnnGtScalarGetWorkspaceSizeFn;
typedef aclnnScalarGetWorkspaceSizeFn aclnnEqScalarGetWorkspaceSizeFn;
/* out (BOOL) = self is neither infinite nor NaN; out (BOOL) = !self. */
typedef aclnnUnaryGetWorkspaceSizeFn aclnnIsFiniteGetWorkspaceSizeFn;
typedef aclnnUnaryGetWorkspaceSizeFn aclnnLogicalNotGetWorkspaceSizeFn;
/* out[i] = start + i * step for the 1-D out (end bounds the count: ceil((end - start) / step)). */
typedef aclnnStatus (*aclnnArangeGetWorkspaceSizeFn)(const aclScalar* start, const aclScalar* end,
                                                     const aclScalar* step, aclTensor* out, uint64_t* workspace_size,
                                                     aclOpExecutor** executor);
/* Reductions over `dims` (the dimensions; keep_dims keeps them with size 1) into out of `dtype`. */
typedef aclnnStatus (*aclnnReduceSumGetWorkspaceSizeFn)(const aclTensor* self, const aclIntArray* dims, bool keep_dims,
                                                        aclDataType dtype, aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor);
typedef aclnnReduceSumGetWorkspaceSizeFn aclnnMeanGetWorkspaceSizeFn;
/* The largest value over `dims`; NaN propagates. */
typedef aclnnStatus (*aclnnAmaxGetWorkspaceSizeFn)(const aclTensor* self, const aclIntArray* dims, bool keep_dims,
                                                   aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor);
/* The largest value over one dimension and the index (INT64) of its first occurrence. */
typedef aclnnStatus (*aclnnMaxDimGetWorkspaceSizeFn)(const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out,
                                                     aclTensor* indices, uint64_t* workspace_size,
                                                     aclOpExecutor** executor);
typedef aclnnUnaryGetWorkspaceSizeFn aclnnAbsGetWorkspaceSizeFn;
/* GELU: approximate 0 is the exact erf form, 1 the tanh form. */
typedef aclnnStatus (*aclnnGeluV2GetWorkspaceSizeFn)(const aclTensor* x, int64_t approximate, aclTensor* y,
                                                     uint64_t* workspace_size, aclOpExecutor** executor);
/* approximate: "none" or "tanh". */
typedef aclnnStatus (*aclnnGeluBackwardV2GetWorkspaceSizeFn)(const aclTensor* grad_output, const aclTensor* self,
                                                             char* approximate, aclTensor* grad_input,
                                                             uint64_t* workspace_size, aclOpExecutor** executor);
typedef aclnnUnaryGetWorkspaceSizeFn aclnnSiluGetWorkspaceSizeFn;
typedef aclnnStatus (*aclnnSiluBackwardGetWorkspaceSizeFn)(const aclTensor* grad_output, const aclTensor* self,
                                                           aclTensor* grad_input, uint64_t* workspace_size,
                                                           aclOpExecutor** executor);

/* ---- Indexing (index INT32 or INT64; an index out of range fails the stream) ---- */
/* out = self with dimension dim replaced by the rows index names (index 1-D). */
typedef aclnnStatus (*aclnnIndexSelectGetWorkspaceSizeFn)(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                          aclTensor* out, uint64_t* workspace_size,
                                                          aclOpExecutor** executor);
/* out[p] = self[p with its dim coordinate replaced by index[p]] (torch.gather). */
typedef aclnnStatus (*aclnnGatherGetWorkspaceSizeFn)(const aclTensor* self, const int64_t dim, const aclTensor* index,
                                                     aclTensor* out, uint64_t* workspace_size,
                                                     aclOpExecutor** executor);
/* out = self, then out[p with its dim coordinate replaced by index[p]] += src[p] (torch.scatter_add). */
typedef aclnnStatus (*aclnnScatterAddGetWorkspaceSizeFn)(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                         const aclTensor* src, aclTensor* out, uint64_t* workspace_size,
                                                         aclOpExecutor** executor);
/* out[p, :] = weight[indices[p], :]. */
typedef aclnnStatus (*aclnnEmbeddingGetWorkspaceSizeFn)(const aclTensor* weight, const aclTensor* indices,
                                                        const aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor);
/* out[v, :] = the sum of grad[p, :] over indices[p] == v (rows never named: 0; padding_idx's row is
 * skipped, and a padding_idx outside [0, num_weights) skips none). */
typedef aclnnStatus (*aclnnEmbeddingDenseBackwardGetWorkspaceSizeFn)(const aclTensor* grad, const aclTensor* indices,
                                                                     uint64_t num_weights, uint64_t padding_idx,
                                                                     bool scale_grad_by_freq, const aclTensor* out,
                                                                     uint64_t* workspace_size,
                                                                     aclOpExecutor** executor);

/* ---- Rows: softmax and normalisation over the last dimension(s) ---- */
typedef aclnnStatus (*aclnnSoftmaxGetWorkspaceSizeFn)(const aclTensor* self, int64_t dim, aclTensor* out,
                                                      uint64_t* workspace_size, aclOpExecutor** executor);
/* out = output * (grad_output - sum(grad_output * output)) over dim. */
typedef aclnnStatus (*aclnnSoftmaxBackwardGetWorkspaceSizeFn)(const aclTensor* grad_output, const aclTensor* output,
                                                              int64_t dim, aclTensor* out, uint64_t* workspace_size,
                                                              aclOpExecutor** executor);
/* Over the trailing normalized_shape: out = (input - mean) * rstd * weight + bias; mean and rstd
 * (FLOAT) have input's shape with the normalized dimensions of size 1. */
typedef aclnnStatus (*aclnnLayerNormGetWorkspaceSizeFn)(const aclTensor* input, const aclIntArray* normalized_shape,
                                                        const aclTensor* weight_optional,
                                                        const aclTensor* bias_optional, double eps, aclTensor* out,
                                                        aclTensor* mean_out_optional, aclTensor* rstd_out_optional,
                                                        uint64_t* workspace_size, aclOpExecutor** executor);
/* output_mask (3 values) selects which of grad_input, grad_weight and grad_bias to compute. */
typedef aclnnStatus (*aclnnLayerNormBackwardGetWorkspaceSizeFn)(
    const aclTensor* grad_out, const aclTensor* input, const aclIntArray* normalized_shape, const aclTensor* mean,
    const aclTensor* rstd, const aclTensor* weight_optional, const aclTensor* bias_optional,
    const aclBoolArray* output_mask, aclTensor* grad_input_out, aclTensor* grad_weight_out, aclTensor* grad_bias_out,
    uint64_t* workspace_size, aclOpExecutor** executor);
/* y = x * rstd * gamma over the trailing dimensions of gamma's rank; rstd (FLOAT) as in LayerNorm. */
typedef aclnnStatus (*aclnnRmsNormGetWorkspaceSizeFn)(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                      const aclTensor* y_out, const aclTensor* rstd_out,
                                                      uint64_t* workspace_size, aclOpExecutor** executor);
typedef aclnnStatus (*aclnnRmsNormGradGetWorkspaceSizeFn)(const aclTensor* dy, const aclTensor* x,
                                                          const aclTensor* rstd, const aclTensor* gamma,
                                                          const aclTensor* dx_out, const aclTensor* dgamma_out,
                                                          uint64_t* workspace_size, aclOpExecutor** executor);

/* ---- FlashAttention (Atlas A2/A3) ----
 * attention_out = Softmax(Mask(scale * query key^T, atten_mask)) value per batch and head, query
 * heads sharing key/value heads when head counts differ (GQA). input_layout "BNSD" (also BSND, BSH,
 * SBH on hardware); any strides. atten_mask [Sq, Skv] BOOL or UINT8, 1 = masked; sparse_mode 0 uses
 * it with the band pre_tokens/next_tokens. softmax_max_out and softmax_sum_out (FLOAT [B, N, Sq, 8],
 * each value repeated 8 times) keep the row maximum and the sum of exp(score - maximum) for the
 * backward. inner_precise 2 computes rows with every key masked (their output is 0). */
typedef aclnnStatus (*aclnnFlashAttentionScoreGetWorkspaceSizeFn)(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* real_shift_optional,
    const aclTensor* drop_mask_optional, const aclTensor* padding_mask_optional, const aclTensor* atten_mask_optional,
    const aclIntArray* prefix_optional, double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
    int64_t head_num, char* input_layout, int64_t inner_precise, int64_t sparse_mode, const aclTensor* softmax_max_out,
    const aclTensor* softmax_sum_out, const aclTensor* softmax_out_out, const aclTensor* attention_out_out,
    uint64_t* workspace_size, aclOpExecutor** executor);
/* dq, dk, dv from dy with the forward's softmax_max, softmax_sum and attention_out; dk and dv sum
 * over the query heads sharing a key/value head. Deterministic only with ACL_OPT_DETERMINISTIC. */
typedef aclnnStatus (*aclnnFlashAttentionScoreGradGetWorkspaceSizeFn)(
    const aclTensor* query, const aclTensor* key_in, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pse_shift_optional, const aclTensor* drop_mask_optional, const aclTensor* padding_mask_optional,
    const aclTensor* atten_mask_optional, const aclTensor* softmax_max_optional, const aclTensor* softmax_sum_optional,
    const aclTensor* softmax_in_optional, const aclTensor* attention_in_optional, const aclIntArray* prefix_optional,
    double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t head_num, char* input_layout,
    int64_t inner_precise, int64_t sparse_mode, const aclTensor* dq_out, const aclTensor* dk_out,
    const aclTensor* dv_out, const aclTensor* dpse_out, uint64_t* workspace_size, aclOpExecutor** executor);

#ifdef __cplusplus
}
#endif

#endif /* H2_ASCEND_ACLNN_H */
