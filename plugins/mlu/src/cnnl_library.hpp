// CNNL (libcnnl.so), opened like CNRT (cnrt_library.hpp) with every operator the plugin calls resolved
// by name at initialize.
#pragma once

#include "cnrt_library.hpp"
#include "mlu/cnnl.h"

namespace h2::mlu {

struct CnnlLibrary {
  CnnlLibrary();  // throws PluginError(RUNTIME_MISSING)

  h2::plugin::VendorLibrary library;
#define H2_CNNL_FUNCTIONS(X)               \
  X(cnnlGetErrorString)                    \
  X(cnnlCreate)                            \
  X(cnnlDestroy)                           \
  X(cnnlSetQueue)                          \
  X(cnnlCreateTensorDescriptor)            \
  X(cnnlDestroyTensorDescriptor)           \
  X(cnnlSetTensorDescriptorEx_v2)          \
  X(cnnlSetTensorDescriptorOnchipDataType) \
  X(cnnlCreateOpTensorDescriptor)          \
  X(cnnlDestroyOpTensorDescriptor)         \
  X(cnnlSetOpTensorDescriptor)             \
  X(cnnlGetOpTensorWorkspaceSize)          \
  X(cnnlOpTensor)                          \
  X(cnnlGetDivWorkspaceSize)               \
  X(cnnlDiv_v2)                            \
  X(cnnlGetPowWorkspaceSize)               \
  X(cnnlPow)                               \
  X(cnnlGetMaximumWorkspaceSize)           \
  X(cnnlMaximum)                           \
  X(cnnlGetMinimumWorkspaceSize)           \
  X(cnnlMinimum)                           \
  X(cnnlTransform_v2)                      \
  X(cnnlExp_v2)                            \
  X(cnnlLog_v2)                            \
  X(cnnlSqrt_v2)                           \
  X(cnnlRsqrt_v2)                          \
  X(cnnlNegTensor)                         \
  X(cnnlReciprocal)                        \
  X(cnnlAbs)                               \
  X(cnnlCreateActivationDescriptor)        \
  X(cnnlDestroyActivationDescriptor)       \
  X(cnnlSetActivationDescriptor_v6)        \
  X(cnnlActivationForward)                 \
  X(cnnlActivationBackward)                \
  X(cnnlGetLogicOpWorkspaceSize)           \
  X(cnnlLogicOp)                           \
  X(cnnlGetSelectV2WorkspaceSize)          \
  X(cnnlSelectV2)                          \
  X(cnnlFill_v3)                           \
  X(cnnlCastDataType)                      \
  X(cnnlGetCopyWorkspaceSize)              \
  X(cnnlCopy_v2)                           \
  X(cnnlArange_v2)                         \
  X(cnnlCreateReduceDescriptor)            \
  X(cnnlDestroyReduceDescriptor)           \
  X(cnnlSetReduceDescriptor_v2)            \
  X(cnnlGetReduceOpWorkspaceSize)          \
  X(cnnlReduce)                            \
  X(cnnlMatMulDescCreate)                  \
  X(cnnlMatMulDescDestroy)                 \
  X(cnnlSetMatMulDescAttr)                 \
  X(cnnlMatMulAlgoCreate)                  \
  X(cnnlMatMulAlgoDestroy)                 \
  X(cnnlCreateMatMulHeuristicResult)       \
  X(cnnlDestroyMatMulHeuristicResult)      \
  X(cnnlGetMatMulAlgoHeuristic)            \
  X(cnnlGetMatMulHeuristicResult)          \
  X(cnnlMatMul_v2)                         \
  X(cnnlGetBatchMatMulAlgoHeuristic)       \
  X(cnnlGetBatchMatMulHeuristicResult)     \
  X(cnnlBatchMatMulBCast_v2)               \
  X(cnnlSoftmaxForward_v2)                 \
  X(cnnlSoftmaxBackward)                   \
  X(cnnlGetLayerNormOpWorkspaceSize)       \
  X(cnnlLayerNormForward)                  \
  X(cnnlGetLayerNormBackwardWorkspaceSize) \
  X(cnnlLayerNormBackward_v2)              \
  X(cnnlEmbeddingForward_v2)               \
  X(cnnlGetEmbeddingBackwardWorkspaceSize) \
  X(cnnlEmbeddingBackward)                 \
  X(cnnlIndexSelect)                       \
  X(cnnlGather_v2)                         \
  X(cnnlGetScatterWorkspaceSize)           \
  X(cnnlScatter_v2)
#define H2_CNNL_MEMBER(name) name##Fn name;
  H2_CNNL_FUNCTIONS(H2_CNNL_MEMBER)
#undef H2_CNNL_MEMBER
};

}  // namespace h2::mlu
