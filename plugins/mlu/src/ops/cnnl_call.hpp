// How the MLU plugin calls CNNL: tensor descriptors made from the ABI's tensors (dtype, dims and
// strides with CNNL_LAYOUT_ARRAY), the operation descriptors CNNL's operators take, each owned for the
// length of one call, and workspaces from memory ordered by the stream (taken before the operator and
// given back after it on the same stream, so it never blocks and is reused at once). Every operator is
// enqueued through the stream's own CNNL handle, which is bound to the stream's queue.
#pragma once

#include <cstdint>
#include <vector>

#include "../mlu_error.hpp"
#include "../runtime.hpp"
#include "stream_scratch.hpp"
#include "tensor_views.hpp"

namespace h2::mlu {

using h2::plugin::all_dims;
using h2::plugin::appended_dimension;
using h2::plugin::reshaped;
using h2::plugin::shape_of;
using h2::plugin::transposed;
using StreamScratch = h2::plugin::StreamScratch<Stream, Runtime, runtime>;
using ScratchTensor = h2::plugin::ScratchTensor<Stream, Runtime, runtime>;

cnnlDataType_t cnnl_dtype(uint32_t dtype);  // an H2_DType; throws UNSUPPORTED for one CNNL lacks

// A cnnlTensorDescriptor_t describing an H2_Tensor's dtype, shape and strides (its data pointer is
// passed next to it). An absent optional tensor (data NULL) is described as NULL.
class TensorDesc {
 public:
  explicit TensorDesc(const H2_Tensor& tensor);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cnnlTensorDescriptor_t get() const { return desc_; }
  // The compute dtype of an operator writing this tensor (matmul's accumulator).
  void set_onchip(cnnlDataType_t dtype);

 private:
  cnnlTensorDescriptor_t desc_ = nullptr;
};

// A CNNL descriptor object of type T, made by `create` and destroyed by `destroy` (the library's).
template <typename T, cnnlStatus_t (*CnnlLibrary::*Create)(T*), cnnlStatus_t (*CnnlLibrary::*Destroy)(T)>
class CnnlObject {
 public:
  explicit CnnlObject(const char* what) {
    const CnnlLibrary& cnnl = runtime().cnnl();
    cnnl_check(cnnl, (cnnl.*Create)(&object_), what);
  }
  ~CnnlObject() { (runtime().cnnl().*Destroy)(object_); }
  CnnlObject(const CnnlObject&) = delete;
  CnnlObject& operator=(const CnnlObject&) = delete;
  T get() const { return object_; }

 private:
  T object_ = nullptr;
};
using OpTensorDesc = CnnlObject<cnnlOpTensorDescriptor_t, &CnnlLibrary::cnnlCreateOpTensorDescriptor,
                                &CnnlLibrary::cnnlDestroyOpTensorDescriptor>;
using ActivationDesc = CnnlObject<cnnlActivationDescriptor_t, &CnnlLibrary::cnnlCreateActivationDescriptor,
                                  &CnnlLibrary::cnnlDestroyActivationDescriptor>;
using ReduceDesc = CnnlObject<cnnlReduceDescriptor_t, &CnnlLibrary::cnnlCreateReduceDescriptor,
                              &CnnlLibrary::cnnlDestroyReduceDescriptor>;
using MatMulDesc =
    CnnlObject<cnnlMatMulDescriptor_t, &CnnlLibrary::cnnlMatMulDescCreate, &CnnlLibrary::cnnlMatMulDescDestroy>;
using MatMulAlgo =
    CnnlObject<cnnlMatMulAlgo_t, &CnnlLibrary::cnnlMatMulAlgoCreate, &CnnlLibrary::cnnlMatMulAlgoDestroy>;
using MatMulHeuristic = CnnlObject<cnnlMatMulHeuristicResult_t, &CnnlLibrary::cnnlCreateMatMulHeuristicResult,
                                   &CnnlLibrary::cnnlDestroyMatMulHeuristicResult>;

// Binds the stream's device on the calling thread and returns the stream's CNNL handle.
cnnlHandle_t handle_of(Stream& stream);

}  // namespace h2::mlu
