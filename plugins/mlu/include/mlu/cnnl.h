/*
 * The subset of Cambricon's CNNL operator library (libcnnl.so) that H2's MLU plugin uses.
 *
 * Written for H2 from Cambricon's public material on CNNL 1.2x (the CNNL developer guide's handle,
 * tensor-descriptor and operator chapters, cnnl_core.h of Cambricon's CNNL examples, and the
 * signatures used by Cambricon's open-source PyTorch and mlu-ops code built against CNNL 1.26 and
 * 2.2). It declares types, constants and signatures only: the plugin resolves every function by name
 * at run time (plugins/mlu/src/cnnl_library.cpp); the emulator under plugins/mlu/emulator implements
 * the same signatures. Nothing here is Cambricon's text.
 *
 * Numbers: the status codes, data types, layouts and computation preferences are the documented
 * values. Cambricon publishes the other enumerations (operation kinds, modes) by name only; the
 * numbers below are H2's, so the plugin and the emulator agree, and must be checked against the
 * cnnl.h of a Neuware installation before the plugin runs on an MLU (docs/writing-a-plugin.md).
 *
 * Conventions every operator follows: descriptors describe a tensor's dtype, dims and strides (in
 * elements) with CNNL_LAYOUT_ARRAY; the caller owns descriptors and memory; an operator is enqueued
 * on the handle's queue (cnnlSetQueue) and does not block the host; its workspace (size from the
 * matching query) must stay allocated until the work has run. Scalars such as alpha and beta are host
 * pointers to float for floating-point tensors.
 */
#ifndef H2_MLU_CNNL_H
#define H2_MLU_CNNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cnrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status, handle ---- */
typedef enum {
  CNNL_STATUS_SUCCESS = 0,
  CNNL_STATUS_NOT_INITIALIZED = 1,
  CNNL_STATUS_ALLOC_FAILED = 2,
  CNNL_STATUS_BAD_PARAM = 3,
  CNNL_STATUS_INTERNAL_ERROR = 4,
  CNNL_STATUS_ARCH_MISMATCH = 5,
  CNNL_STATUS_EXECUTION_FAILED = 6,
  CNNL_STATUS_NOT_SUPPORTED = 7,
  CNNL_STATUS_NUMERICAL_OVERFLOW = 8
} cnnlStatus_t;

typedef const char* (*cnnlGetErrorStringFn)(cnnlStatus_t status);

/* A handle binds CNNL to the current device and, with cnnlSetQueue, to one queue of it: every
 * operator called with the handle is enqueued there. Owned by the caller until cnnlDestroy. */
typedef struct cnnlContext* cnnlHandle_t;
typedef cnnlStatus_t (*cnnlCreateFn)(cnnlHandle_t* handle);
typedef cnnlStatus_t (*cnnlDestroyFn)(cnnlHandle_t handle);
typedef cnnlStatus_t (*cnnlSetQueueFn)(cnnlHandle_t handle, cnrtQueue_t queue);
typedef cnnlStatus_t (*cnnlGetQueueFn)(cnnlHandle_t handle, cnrtQueue_t* queue);

/* ---- Tensor descriptors ---- */
typedef enum {
  CNNL_DTYPE_INVALID = 0,
  CNNL_DTYPE_HALF = 1,
  CNNL_DTYPE_FLOAT = 2,
  CNNL_DTYPE_INT8 = 3,
  CNNL_DTYPE_INT16 = 4,
  CNNL_DTYPE_INT32 = 6,
  CNNL_DTYPE_UINT8 = 7,
  CNNL_DTYPE_BOOL = 8,
  CNNL_DTYPE_INT64 = 9,
  CNNL_DTYPE_DOUBLE = 14,
  CNNL_DTYPE_BFLOAT16 = 17
} cnnlDataType_t;

typedef enum { CNNL_LAYOUT_NCHW = 0, CNNL_LAYOUT_NHWC = 1, CNNL_LAYOUT_ARRAY = 4 } cnnlTensorLayout_t;

typedef enum { CNNL_COMPUTATION_FAST = 0, CNNL_COMPUTATION_HIGH_PRECISION = 1 } cnnlComputationPreference_t;
typedef enum { CNNL_NOT_PROPAGATE_NAN = 0, CNNL_PROPAGATE_NAN = 1 } cnnlNanPropagation_t;
typedef enum { CNNL_POINTER_MODE_HOST = 0, CNNL_POINTER_MODE_DEVICE = 1 } cnnlPointerMode_t;

#define CNNL_DIM_MAX 8

typedef struct cnnlTensorStruct* cnnlTensorDescriptor_t;
typedef cnnlStatus_t (*cnnlCreateTensorDescriptorFn)(cnnlTensorDescriptor_t* desc);
typedef cnnlStatus_t (*cnnlDestroyTensorDescriptorFn)(cnnlTensorDescriptor_t desc);
/* dims and strides (in elements) of `dim_count` <= CNNL_DIM_MAX dimensions; 0 dimensions is a scalar. */
typedef cnnlStatus_t (*cnnlSetTensorDescriptorEx_v2Fn)(cnnlTensorDescriptor_t desc, cnnlTensorLayout_t layout,
                                                       cnnlDataType_t dtype, int dim_count, const int64_t dims[],
                                                       const int64_t strides[]);
/* The dtype an operator computes in on chip (e.g. FLOAT for HALF data): matmul's accumulator. */
typedef cnnlStatus_t (*cnnlSetTensorDescriptorOnchipDataTypeFn)(cnnlTensorDescriptor_t desc,
                                                                cnnlDataType_t onchip_dtype);

/* ---- Elementwise ---- */
typedef enum { CNNL_OP_TENSOR_ADD = 0, CNNL_OP_TENSOR_MUL = 1, CNNL_OP_TENSOR_SUB = 2 } cnnlOpTensorDesc_t;
typedef struct cnnlOpTensorStruct* cnnlOpTensorDescriptor_t;
typedef cnnlStatus_t (*cnnlCreateOpTensorDescriptorFn)(cnnlOpTensorDescriptor_t* desc);
typedef cnnlStatus_t (*cnnlDestroyOpTensorDescriptorFn)(cnnlOpTensorDescriptor_t desc);
typedef cnnlStatus_t (*cnnlSetOpTensorDescriptorFn)(cnnlOpTensorDescriptor_t desc, cnnlOpTensorDesc_t op,
                                                    cnnlDataType_t compute_dtype, cnnlNanPropagation_t nan);
typedef cnnlStatus_t (*cnnlGetOpTensorWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t a_desc,
                                                       const cnnlTensorDescriptor_t b_desc,
                                                       const cnnlTensorDescriptor_t c_desc, size_t* size);
/* c = op(alpha1 * a, alpha2 * b) + beta * c; a and b broadcast to c. */
typedef cnnlStatus_t (*cnnlOpTensorFn)(cnnlHandle_t handle, const cnnlOpTensorDescriptor_t op_desc, const void* alpha1,
                                       const cnnlTensorDescriptor_t a_desc, const void* a, const void* alpha2,
                                       const cnnlTensorDescriptor_t b_desc, const void* b, void* workspace,
                                       size_t workspace_size, const void* beta, const cnnlTensorDescriptor_t c_desc,
                                       void* c);

/* z = x / y; z = x ^ y. */
typedef cnnlStatus_t (*cnnlGetDivWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc,
                                                  const cnnlTensorDescriptor_t y_desc,
                                                  const cnnlTensorDescriptor_t z_desc, size_t* size);
typedef cnnlStatus_t (*cnnlDiv_v2Fn)(cnnlHandle_t handle, cnnlComputationPreference_t prefer,
                                     const cnnlTensorDescriptor_t x_desc, const void* x,
                                     const cnnlTensorDescriptor_t y_desc, const void* y, void* workspace,
                                     size_t workspace_size, const cnnlTensorDescriptor_t z_desc, void* z);
typedef cnnlGetDivWorkspaceSizeFn cnnlGetPowWorkspaceSizeFn;
typedef cnnlDiv_v2Fn cnnlPowFn;

/* c = max(a, b) / min(a, b); NaN if either is NaN. Note the workspace comes after the output, and
 * its query takes the output's descriptor only. */
typedef cnnlStatus_t (*cnnlGetMaximumWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t c_desc,
                                                      size_t* size);
typedef cnnlStatus_t (*cnnlMaximumFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t a_desc, const void* a,
                                      const cnnlTensorDescriptor_t b_desc, const void* b,
                                      const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                      size_t workspace_size);
typedef cnnlGetMaximumWorkspaceSizeFn cnnlGetMinimumWorkspaceSizeFn;
typedef cnnlMaximumFn cnnlMinimumFn;

/* y = alpha * x + beta with scalar alpha and beta (host pointers to float in HOST mode). */
typedef cnnlStatus_t (*cnnlTransform_v2Fn)(cnnlHandle_t handle, cnnlPointerMode_t mode, const void* alpha,
                                           const cnnlTensorDescriptor_t x_desc, const void* x, const void* beta,
                                           const cnnlTensorDescriptor_t y_desc, void* y);

typedef enum { CNNL_LOG_E = 0, CNNL_LOG_2 = 1, CNNL_LOG_10 = 2 } cnnlLogBase_t;
typedef cnnlStatus_t (*cnnlExp_v2Fn)(cnnlHandle_t handle, cnnlComputationPreference_t prefer,
                                     const cnnlTensorDescriptor_t x_desc, const void* x,
                                     const cnnlTensorDescriptor_t y_desc, void* y);
typedef cnnlStatus_t (*cnnlLog_v2Fn)(cnnlHandle_t handle, cnnlComputationPreference_t prefer, cnnlLogBase_t base,
                                     const cnnlTensorDescriptor_t x_desc, const void* x,
                                     const cnnlTensorDescriptor_t y_desc, void* y);
typedef cnnlExp_v2Fn cnnlSqrt_v2Fn;
typedef cnnlExp_v2Fn cnnlRsqrt_v2Fn;
typedef cnnlStatus_t (*cnnlNegTensorFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                        const cnnlTensorDescriptor_t y_desc, void* y);
typedef cnnlNegTensorFn cnnlReciprocalFn;
typedef cnnlNegTensorFn cnnlAbsFn;

/* ---- Activations ---- */
typedef enum {
  CNNL_ACTIVATION_SIGMOID = 1,
  CNNL_ACTIVATION_TANH = 2,
  CNNL_ACTIVATION_GELU = 11,
  CNNL_ACTIVATION_SILU = 20
} cnnlActivationMode_t;
typedef enum { CNNL_ACTIVATION_FAST = 0, CNNL_ACTIVATION_HIGH_PRECISION = 1 } cnnlActivationPreference_t;
typedef struct cnnlActivationStruct* cnnlActivationDescriptor_t;
typedef cnnlStatus_t (*cnnlCreateActivationDescriptorFn)(cnnlActivationDescriptor_t* desc);
typedef cnnlStatus_t (*cnnlDestroyActivationDescriptorFn)(cnnlActivationDescriptor_t desc);
/* coef, sliced_dim, gamma, scale and is_result serve other modes (0 for these); `approximate` selects
 * GELU's tanh form. */
typedef cnnlStatus_t (*cnnlSetActivationDescriptor_v6Fn)(cnnlActivationDescriptor_t desc, cnnlActivationMode_t mode,
                                                         cnnlActivationPreference_t prefer, cnnlNanPropagation_t nan,
                                                         float coef, int sliced_dim, float gamma, float scale,
                                                         bool is_result, bool approximate);
/* alpha and beta are reserved (NULL). */
typedef cnnlStatus_t (*cnnlActivationForwardFn)(cnnlHandle_t handle, const cnnlActivationDescriptor_t desc,
                                                const void* alpha, const cnnlTensorDescriptor_t x_desc, const void* x,
                                                const void* beta, const cnnlTensorDescriptor_t y_desc, void* y);
/* diff_x = diff_y * f'(x): GELU and SILU read x (y and y_desc NULL); SIGMOID and TANH read y. */
typedef cnnlStatus_t (*cnnlActivationBackwardFn)(cnnlHandle_t handle, const cnnlActivationDescriptor_t desc,
                                                 const void* alpha, const cnnlTensorDescriptor_t y_desc, const void* y,
                                                 const cnnlTensorDescriptor_t diff_y_desc, const void* diff_y,
                                                 const cnnlTensorDescriptor_t x_desc, const void* x, const void* beta,
                                                 const cnnlTensorDescriptor_t diff_x_desc, void* diff_x);

/* ---- Comparison, selection, fill, cast, copy, arange ---- */
typedef enum {
  CNNL_LOGIC_OP_EQ = 0,
  CNNL_LOGIC_OP_NE = 1,
  CNNL_LOGIC_OP_LT = 2,
  CNNL_LOGIC_OP_LE = 3,
  CNNL_LOGIC_OP_GT = 4,
  CNNL_LOGIC_OP_GE = 5,
  CNNL_LOGIC_OP_AND = 6,
  CNNL_LOGIC_OP_OR = 7
} cnnlLogicOp_t;
typedef cnnlGetOpTensorWorkspaceSizeFn cnnlGetLogicOpWorkspaceSizeFn;
/* c = a (op) b as BOOL (or c's dtype, 0 or 1); a and b broadcast to c. */
typedef cnnlStatus_t (*cnnlLogicOpFn)(cnnlHandle_t handle, cnnlLogicOp_t op, const cnnlTensorDescriptor_t a_desc,
                                      const void* a, const cnnlTensorDescriptor_t b_desc, const void* b,
                                      void* workspace, size_t workspace_size, const cnnlTensorDescriptor_t c_desc,
                                      void* c);

/* out = cond ? then : else, broadcasting each to out (cond BOOL). */
typedef cnnlStatus_t (*cnnlGetSelectV2WorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t cond_desc,
                                                       const cnnlTensorDescriptor_t then_desc,
                                                       const cnnlTensorDescriptor_t else_desc, size_t* size);
typedef cnnlStatus_t (*cnnlSelectV2Fn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t cond_desc, const void* cond,
                                       const cnnlTensorDescriptor_t then_desc, const void* then_value,
                                       const cnnlTensorDescriptor_t else_desc, const void* else_value, void* workspace,
                                       size_t workspace_size, const cnnlTensorDescriptor_t out_desc, void* out);

/* Every element of y = *value (HOST mode: a host pointer to a value of y's dtype). */
typedef cnnlStatus_t (*cnnlFill_v3Fn)(cnnlHandle_t handle, cnnlPointerMode_t mode, const void* value,
                                      const cnnlTensorDescriptor_t y_desc, void* y);

typedef enum {
  CNNL_CAST_FLOAT_TO_HALF = 0,
  CNNL_CAST_HALF_TO_FLOAT = 1,
  CNNL_CAST_FLOAT_TO_BFLOAT16 = 2,
  CNNL_CAST_BFLOAT16_TO_FLOAT = 3,
  CNNL_CAST_FLOAT_TO_INT32 = 4,
  CNNL_CAST_INT32_TO_FLOAT = 5,
  CNNL_CAST_FLOAT_TO_INT64 = 6,
  CNNL_CAST_INT64_TO_FLOAT = 7,
  CNNL_CAST_FLOAT_TO_BOOL = 8,
  CNNL_CAST_BOOL_TO_FLOAT = 9,
  CNNL_CAST_FLOAT_TO_UINT8 = 10,
  CNNL_CAST_UINT8_TO_FLOAT = 11,
  CNNL_CAST_INT32_TO_INT64 = 12,
  CNNL_CAST_INT64_TO_INT32 = 13
} cnnlCastDataType_t;
/* y = x converted (same shape; any strides). Float to integer truncates toward zero. */
typedef cnnlStatus_t (*cnnlCastDataTypeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                           cnnlCastDataType_t cast, const cnnlTensorDescriptor_t y_desc, void* y);

/* y = x of one dtype and shape with any strides of either. */
typedef cnnlStatus_t (*cnnlGetCopyWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc,
                                                   const cnnlTensorDescriptor_t y_desc, size_t* size);
typedef cnnlStatus_t (*cnnlCopy_v2Fn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                      const cnnlTensorDescriptor_t y_desc, void* y, void* workspace,
                                      size_t workspace_size);

/* out[i] = start + i * step for the 1-D out; start and step are host pointers to values of out's
 * dtype (float for floating-point outputs). */
typedef cnnlStatus_t (*cnnlArange_v2Fn)(cnnlHandle_t handle, cnnlComputationPreference_t prefer, const void* start,
                                        const void* step, const cnnlTensorDescriptor_t out_desc, void* out);

/* ---- Reductions ---- */
typedef enum {
  CNNL_REDUCE_ADD = 0,
  CNNL_REDUCE_AVG = 1,
  CNNL_REDUCE_MUL = 2,
  CNNL_REDUCE_MAX = 3,
  CNNL_REDUCE_MIN = 4,
  CNNL_REDUCE_NORM1 = 7,
  CNNL_REDUCE_NORM2 = 8,
  CNNL_REDUCE_NORMP = 9
} cnnlReduceOp_t;
typedef enum {
  CNNL_REDUCE_NO_INDICES = 0,
  CNNL_REDUCE_FLATTENED_INDICES = 1,
  CNNL_REDUCE_ONLY_INDICES = 2
} cnnlReduceIndices_t;
typedef enum { CNNL_32BIT_INDICES = 0, CNNL_16BIT_INDICES = 1, CNNL_64BIT_INDICES = 2 } cnnlIndicesType_t;
typedef struct cnnlReduceStruct* cnnlReduceDescriptor_t;
typedef cnnlStatus_t (*cnnlCreateReduceDescriptorFn)(cnnlReduceDescriptor_t* desc);
typedef cnnlStatus_t (*cnnlDestroyReduceDescriptorFn)(cnnlReduceDescriptor_t desc);
/* Reduces over the `axis_count` dimensions in `axis`, computing in `compute_dtype`; `p` is NORMP's
 * exponent. */
typedef cnnlStatus_t (*cnnlSetReduceDescriptor_v2Fn)(cnnlReduceDescriptor_t desc, int axis[], int axis_count,
                                                     cnnlReduceOp_t op, cnnlDataType_t compute_dtype,
                                                     cnnlNanPropagation_t nan, cnnlReduceIndices_t indices,
                                                     cnnlIndicesType_t indices_type, float p);
typedef cnnlStatus_t (*cnnlGetReduceOpWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t input_desc,
                                                       const cnnlTensorDescriptor_t output_desc,
                                                       const cnnlReduceDescriptor_t desc, size_t* size);
/* The output keeps the input's rank (reduced dimensions of size 1). With indices requested, MAX
 * writes the position of the first maximum along the (single) reduced axis. alpha and beta are
 * reserved (NULL). */
typedef cnnlStatus_t (*cnnlReduceFn)(cnnlHandle_t handle, const cnnlReduceDescriptor_t desc, void* workspace,
                                     size_t workspace_size, const void* alpha, const cnnlTensorDescriptor_t input_desc,
                                     const void* input, const size_t indices_size, void* indices, const void* beta,
                                     const cnnlTensorDescriptor_t output_desc, void* output);

/* ---- Matrix multiplication ---- */
typedef enum {
  CNNL_MATMUL_DESC_TRANSA = 0,
  CNNL_MATMUL_DESC_TRANSB = 1,
  CNNL_MATMUL_USE_BETA = 3,
  CNNL_MATMUL_ALLOW_TF32 = 4,
  CNNL_MATMUL_DESC_COMPUTE_TYPE = 5
} cnnlMatMulDescAttribute_t;
typedef struct cnnlMatMulStruct* cnnlMatMulDescriptor_t;
typedef struct cnnlMatMulAlgoStruct* cnnlMatMulAlgo_t;
typedef struct cnnlMatMulHeuristicResult* cnnlMatMulHeuristicResult_t;
typedef struct cnnlMatMulPrefer* cnnlMatMulPrefer_t;
typedef cnnlStatus_t (*cnnlMatMulDescCreateFn)(cnnlMatMulDescriptor_t* desc);
typedef cnnlStatus_t (*cnnlMatMulDescDestroyFn)(cnnlMatMulDescriptor_t desc);
/* Attribute values are int32_t (TRANSA, TRANSB, USE_BETA, ALLOW_TF32) or a cnnlDataType_t. */
typedef cnnlStatus_t (*cnnlSetMatMulDescAttrFn)(cnnlMatMulDescriptor_t desc, cnnlMatMulDescAttribute_t attr,
                                                const void* buffer, size_t size);
typedef cnnlStatus_t (*cnnlMatMulAlgoCreateFn)(cnnlMatMulAlgo_t* algo);
typedef cnnlStatus_t (*cnnlMatMulAlgoDestroyFn)(cnnlMatMulAlgo_t algo);
typedef cnnlStatus_t (*cnnlCreateMatMulHeuristicResultFn)(cnnlMatMulHeuristicResult_t* result);
typedef cnnlStatus_t (*cnnlDestroyMatMulHeuristicResultFn)(cnnlMatMulHeuristicResult_t result);
typedef cnnlStatus_t (*cnnlGetMatMulAlgoHeuristicFn)(cnnlHandle_t handle, cnnlMatMulDescriptor_t desc,
                                                     cnnlTensorDescriptor_t a_desc, cnnlTensorDescriptor_t b_desc,
                                                     cnnlTensorDescriptor_t c_desc, cnnlTensorDescriptor_t d_desc,
                                                     cnnlMatMulPrefer_t prefer, int requested,
                                                     cnnlMatMulHeuristicResult_t results[], int* returned);
/* The algorithm a heuristic result chose, written into `algo`, and its workspace size. */
typedef cnnlStatus_t (*cnnlGetMatMulHeuristicResultFn)(cnnlMatMulHeuristicResult_t result, cnnlMatMulAlgo_t algo,
                                                       size_t* workspace_size);
/* d = alpha * op(a) op(b) + beta * c for 2-D operands (c read only with USE_BETA). */
typedef cnnlStatus_t (*cnnlMatMul_v2Fn)(cnnlHandle_t handle, const cnnlMatMulDescriptor_t desc,
                                        const cnnlMatMulAlgo_t algo, const void* alpha,
                                        const cnnlTensorDescriptor_t a_desc, const void* a,
                                        const cnnlTensorDescriptor_t b_desc, const void* b, const void* beta,
                                        const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                        size_t workspace_size, const cnnlTensorDescriptor_t d_desc, void* d);
typedef cnnlStatus_t (*cnnlGetBatchMatMulAlgoHeuristicFn)(cnnlHandle_t handle, cnnlMatMulDescriptor_t desc,
                                                          cnnlTensorDescriptor_t a_desc, cnnlTensorDescriptor_t b_desc,
                                                          cnnlTensorDescriptor_t c_desc, cnnlMatMulPrefer_t prefer,
                                                          int requested, cnnlMatMulHeuristicResult_t results[],
                                                          int* returned);
typedef cnnlGetMatMulHeuristicResultFn cnnlGetBatchMatMulHeuristicResultFn;
/* c = alpha * op(a) op(b) + beta * c over the leading (batch) dimensions, which broadcast. */
typedef cnnlStatus_t (*cnnlBatchMatMulBCast_v2Fn)(cnnlHandle_t handle, const cnnlMatMulDescriptor_t desc,
                                                  const cnnlMatMulAlgo_t algo, const void* alpha,
                                                  const cnnlTensorDescriptor_t a_desc, const void* a,
                                                  const cnnlTensorDescriptor_t b_desc, const void* b, const void* beta,
                                                  const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                                  size_t workspace_size);

/* ---- Softmax ----
 * On a 3-D tensor [d0, d1, d2]: LOW_DIMENSION normalizes over d2, MEDIUM over d1, HIGH over d0. alpha
 * and beta are reserved (NULL). */
typedef enum { CNNL_SOFTMAX_FAST = 0, CNNL_SOFTMAX_ACCURATE = 1, CNNL_SOFTMAX_LOG = 2 } cnnlSoftmaxAlgorithm_t;
typedef enum {
  CNNL_SOFTMAX_MODE_HIGH_DIMENSION = 0,
  CNNL_SOFTMAX_MODE_MEDIUM_DIMENSION = 1,
  CNNL_SOFTMAX_MODE_LOW_DIMENSION = 2
} cnnlSoftmaxMode_t;
typedef cnnlStatus_t (*cnnlSoftmaxForward_v2Fn)(cnnlHandle_t handle, cnnlSoftmaxAlgorithm_t algorithm,
                                                cnnlSoftmaxMode_t mode, cnnlComputationPreference_t prefer,
                                                const void* alpha, const cnnlTensorDescriptor_t x_desc, const void* x,
                                                const void* beta, const cnnlTensorDescriptor_t y_desc, void* y);
typedef cnnlStatus_t (*cnnlSoftmaxBackwardFn)(cnnlHandle_t handle, cnnlSoftmaxAlgorithm_t algorithm,
                                              cnnlSoftmaxMode_t mode, const void* alpha,
                                              const cnnlTensorDescriptor_t y_desc, const void* y,
                                              const cnnlTensorDescriptor_t diff_y_desc, const void* diff_y,
                                              const void* beta, const cnnlTensorDescriptor_t diff_x_desc, void* diff_x);

/* ---- Layer normalization ----
 * Normalizes over the dimensions from `axis` on; weight and bias (optional, NULL) have the shape of
 * those dimensions; mean and rstd have the shape of the dimensions before `axis`. Note the two
 * workspace queries order their arguments differently. */
typedef cnnlStatus_t (*cnnlGetLayerNormOpWorkspaceSizeFn)(cnnlHandle_t handle, int axis,
                                                          const cnnlTensorDescriptor_t x_desc, size_t* size);
typedef cnnlStatus_t (*cnnlLayerNormForwardFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                               int axis, const cnnlTensorDescriptor_t weight_bias_desc,
                                               const void* weight, const void* bias, float eps, void* workspace,
                                               size_t workspace_size, const cnnlTensorDescriptor_t y_desc, void* y,
                                               const cnnlTensorDescriptor_t mean_rstd_desc, void* mean, void* rstd);
typedef cnnlStatus_t (*cnnlGetLayerNormBackwardWorkspaceSizeFn)(cnnlHandle_t handle,
                                                                const cnnlTensorDescriptor_t x_desc, int axis,
                                                                size_t* size);
typedef cnnlStatus_t (*cnnlLayerNormBackward_v2Fn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc,
                                                   const void* x, int axis, const cnnlTensorDescriptor_t diff_z_desc,
                                                   const void* diff_z, const cnnlTensorDescriptor_t weight_bias_desc,
                                                   const void* weight, const cnnlTensorDescriptor_t mean_rstd_desc,
                                                   const void* mean, const void* rstd, void* workspace,
                                                   size_t workspace_size, const cnnlTensorDescriptor_t diff_x_desc,
                                                   void* diff_x, void* diff_weight, void* diff_bias);

/* ---- Indexing ---- */
/* output[p, :] = weight[indices[p], :]; max_norm and norm_type unused (NULL). */
typedef cnnlStatus_t (*cnnlEmbeddingForward_v2Fn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t weight_desc,
                                                  const void* weight, const cnnlTensorDescriptor_t indices_desc,
                                                  const void* indices, int padding_idx, const void* max_norm,
                                                  const void* norm_type, const cnnlTensorDescriptor_t output_desc,
                                                  void* output);
typedef cnnlStatus_t (*cnnlGetEmbeddingBackwardWorkspaceSizeFn)(cnnlHandle_t handle,
                                                                const cnnlTensorDescriptor_t grad_desc,
                                                                const cnnlTensorDescriptor_t output_desc,
                                                                bool scale_grad_by_freq, size_t* size);
/* output (the weight's gradient, overwritten) = the sums of grad rows per index. */
typedef cnnlStatus_t (*cnnlEmbeddingBackwardFn)(cnnlHandle_t handle, int padding_idx, bool scale_grad_by_freq,
                                                const cnnlTensorDescriptor_t indices_desc, const void* indices,
                                                const cnnlTensorDescriptor_t grad_desc, const void* grad,
                                                void* workspace, size_t workspace_size,
                                                const cnnlTensorDescriptor_t output_desc, void* output);
typedef cnnlStatus_t (*cnnlIndexSelectFn)(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                          const void* input, const cnnlTensorDescriptor_t index_desc, const void* index,
                                          const cnnlTensorDescriptor_t output_desc, void* output);
/* torch.gather: output[p] = input[p with its coordinate along dim replaced by index[p]]. */
typedef cnnlStatus_t (*cnnlGather_v2Fn)(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                        const void* input, const cnnlTensorDescriptor_t index_desc, const void* index,
                                        void* workspace, size_t workspace_size,
                                        const cnnlTensorDescriptor_t output_desc, void* output);
typedef enum { CNNL_SCATTER = 0, CNNL_SCATTER_ADD = 1 } cnnlScatterMode_t;
typedef cnnlStatus_t (*cnnlGetScatterWorkspaceSizeFn)(cnnlHandle_t handle, const cnnlTensorDescriptor_t index_desc,
                                                      size_t* size);
/* output = input with src scattered (ADD: added) along dim at index; the mode comes last. */
typedef cnnlStatus_t (*cnnlScatter_v2Fn)(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                         const void* input, const cnnlTensorDescriptor_t index_desc, const void* index,
                                         const cnnlTensorDescriptor_t src_desc, const void* src, void* workspace,
                                         size_t workspace_size, const cnnlTensorDescriptor_t output_desc, void* output,
                                         cnnlScatterMode_t mode);

#ifdef __cplusplus
}
#endif

#endif /* H2_MLU_CNNL_H */
