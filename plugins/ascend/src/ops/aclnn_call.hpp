// How the plugin calls an aclnn operator: descriptors made from the ABI's tensors, scalars, and the
// two phases with a workspace taken from memory ordered by the stream (allocated before the operator
// and freed after it on the same stream, so it never blocks and is reused at once).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "../runtime.hpp"
#include "ascend/aclnn.h"
#include "stream_scratch.hpp"
#include "tensor_views.hpp"

namespace h2::ascend {

aclDataType acl_dtype(uint32_t dtype);  // an H2_DType; throws UNSUPPORTED for one aclnn lacks
size_t dtype_bytes(uint32_t dtype);
using h2::plugin::all_dims;
using h2::plugin::appended_dimension;
using h2::plugin::reshaped;
using h2::plugin::shape_of;
using h2::plugin::transposed;

// An aclTensor describing an H2_Tensor as a view of the allocation that holds it: storage from the
// allocation's start, an element offset to the tensor's first element, its shape and strides. An
// absent optional tensor (data NULL) is described as NULL, which aclnn takes for "none".
class AclTensor {
 public:
  AclTensor(const H2_Tensor& tensor);
  ~AclTensor();
  AclTensor(const AclTensor&) = delete;
  AclTensor& operator=(const AclTensor&) = delete;
  aclTensor* get() const { return tensor_; }

 private:
  aclTensor* tensor_ = nullptr;
};

class AclScalar {
 public:
  explicit AclScalar(double value);  // a DOUBLE scalar: the operator converts it
  ~AclScalar();
  AclScalar(const AclScalar&) = delete;
  AclScalar& operator=(const AclScalar&) = delete;
  aclScalar* get() const { return scalar_; }

 private:
  aclScalar* scalar_ = nullptr;
};

class AclIntArray {
 public:
  explicit AclIntArray(const std::vector<int64_t>& values);
  ~AclIntArray();
  AclIntArray(const AclIntArray&) = delete;
  AclIntArray& operator=(const AclIntArray&) = delete;
  aclIntArray* get() const { return array_; }

 private:
  aclIntArray* array_ = nullptr;
};

// Scratch memory and tensors ordered by the stream (plugins/common/stream_scratch.hpp).
using StreamScratch = h2::plugin::StreamScratch<Stream, Runtime, runtime>;
using ScratchTensor = h2::plugin::ScratchTensor<Stream, Runtime, runtime>;

// `tensor` itself when it is BOOL, else a BOOL copy of it in scratch memory (aclnn takes BOOL masks;
// the ABI takes U8 ones too).
struct BoolMask {
  BoolMask(Stream& stream, const H2_Tensor& tensor);
  std::optional<ScratchTensor> copy;
  H2_Tensor mask;
};

// y = x (any dtypes and strides) with aclnnInplaceCopy.
void copy_tensor(Stream& stream, const H2_Tensor& y, const H2_Tensor& x);

// Runs aclnn operator `name`: `plan(&workspace_size, &executor)` is its phase 1 (returning its
// aclnnStatus), `run` its phase 2.
void run_aclnn(Stream& stream, const char* name, const std::function<aclnnStatus(uint64_t*, aclOpExecutor**)>& plan,
               aclnnRunFn run);

}  // namespace h2::ascend
