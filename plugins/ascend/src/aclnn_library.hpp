// aclnn, CANN's operator library: descriptors and executors from libnnopbase.so, the operators from
// libopapi.so, both opened from the same CANN installation as AscendCL (acl_library.hpp) with every
// function the plugin calls resolved by name when it initializes.
#pragma once

#include "ascend/aclnn.h"
#include "vendor_library.hpp"

namespace h2::ascend {

// clang-format off
#define H2_NNOPBASE_FUNCTIONS(X) \
  X(aclCreateTensor) \
  X(aclDestroyTensor) \
  X(aclCreateScalar) \
  X(aclDestroyScalar) \
  X(aclCreateIntArray) \
  X(aclDestroyIntArray) \
  X(aclCreateBoolArray) \
  X(aclDestroyBoolArray)

// Each operator: its phase-1 function (aclnnXxxGetWorkspaceSize) and its phase-2 one (aclnnXxx).
#define H2_OPAPI_OPERATORS(X) \
  X(aclnnInplaceCopy) \
  X(aclnnInplaceFillScalar) \
  X(aclnnAdd) \
  X(aclnnSub) \
  X(aclnnMul) \
  X(aclnnDiv) \
  X(aclnnMaximum) \
  X(aclnnMinimum) \
  X(aclnnPowTensorTensor) \
  X(aclnnAdds) \
  X(aclnnSubs) \
  X(aclnnRsubs) \
  X(aclnnMuls) \
  X(aclnnDivs) \
  X(aclnnPowTensorScalar) \
  X(aclnnPowScalarTensor) \
  X(aclnnClampMin) \
  X(aclnnClampMax) \
  X(aclnnExp) \
  X(aclnnLog) \
  X(aclnnSqrt) \
  X(aclnnRsqrt) \
  X(aclnnNeg) \
  X(aclnnReciprocal) \
  X(aclnnAbs) \
  X(aclnnInplaceAddmm) \
  X(aclnnBaddbmm) \
  X(aclnnGtScalar) \
  X(aclnnEqScalar) \
  X(aclnnIsFinite) \
  X(aclnnLogicalNot) \
  X(aclnnSWhere) \
  X(aclnnInplaceMaskedFillScalar) \
  X(aclnnArange) \
  X(aclnnReduceSum) \
  X(aclnnMean) \
  X(aclnnAmax) \
  X(aclnnMaxDim) \
  X(aclnnGeluV2) \
  X(aclnnGeluBackwardV2) \
  X(aclnnSilu) \
  X(aclnnSiluBackward) \
  X(aclnnIndexSelect) \
  X(aclnnGather) \
  X(aclnnScatterAdd) \
  X(aclnnEmbedding) \
  X(aclnnEmbeddingDenseBackward) \
  X(aclnnSoftmax) \
  X(aclnnSoftmaxBackward) \
  X(aclnnLayerNorm) \
  X(aclnnLayerNormBackward) \
  X(aclnnRmsNorm) \
  X(aclnnRmsNormGrad) \
  X(aclnnFlashAttentionScore) \
  X(aclnnFlashAttentionScoreGrad)
// clang-format on

struct AclnnLibrary {
  AclnnLibrary();  // throws PluginError(RUNTIME_MISSING)

  h2::plugin::VendorLibrary nnopbase;
  h2::plugin::VendorLibrary opapi;
#define H2_NNOPBASE_MEMBER(name) name##Fn name;
  H2_NNOPBASE_FUNCTIONS(H2_NNOPBASE_MEMBER)
#undef H2_NNOPBASE_MEMBER
#define H2_OPAPI_MEMBERS(op)            \
  op##GetWorkspaceSizeFn op##Workspace; \
  aclnnRunFn op;
  H2_OPAPI_OPERATORS(H2_OPAPI_MEMBERS)
#undef H2_OPAPI_MEMBERS
};

}  // namespace h2::ascend
