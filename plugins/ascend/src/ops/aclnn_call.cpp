#include "aclnn_call.hpp"

#include "../acl_error.hpp"
#include "dtype_size.hpp"

namespace h2::ascend {

using h2::plugin::fail;

aclDataType acl_dtype(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F32: return ACL_FLOAT;
    case H2_DTYPE_F16: return ACL_FLOAT16;
    case H2_DTYPE_BF16: return ACL_BF16;
    case H2_DTYPE_F64: return ACL_DOUBLE;
    case H2_DTYPE_I32: return ACL_INT32;
    case H2_DTYPE_I64: return ACL_INT64;
    case H2_DTYPE_U8: return ACL_UINT8;
    case H2_DTYPE_BOOL: return ACL_BOOL;
    default: fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no aclDataType");
  }
}

size_t dtype_bytes(uint32_t dtype) {
  const size_t bytes = h2::plugin::dtype_size(dtype);
  if (bytes == 0) fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no size");
  return bytes;
}

AclTensor::AclTensor(const H2_Tensor& tensor) {
  if (tensor.data == nullptr) return;
  const Runtime& r = runtime();
  const size_t element = dtype_bytes(tensor.dtype);
  const auto [base, bytes] = r.allocation_of(tensor.data);
  const auto distance = static_cast<size_t>(static_cast<const char*>(tensor.data) - base);
  if (distance % element != 0)
    fail(H2_STATUS_UNSUPPORTED,
         "a tensor starts " + std::to_string(distance) +
             " bytes into its allocation, not a whole number of elements: aclnn cannot describe it");
  const int64_t storage = static_cast<int64_t>(bytes / element);
  tensor_ = r.aclnn().aclCreateTensor(tensor.shape, tensor.rank, acl_dtype(tensor.dtype), tensor.strides,
                                      static_cast<int64_t>(distance / element), ACL_FORMAT_ND, &storage, 1,
                                      const_cast<char*>(base));
  if (tensor_ == nullptr) {
    const char* detail = r.acl().aclGetRecentErrMsg();
    fail(H2_STATUS_INTERNAL, std::string("aclCreateTensor failed") + (detail ? std::string(": ") + detail : ""));
  }
}

AclTensor::~AclTensor() {
  if (tensor_ != nullptr) runtime().aclnn().aclDestroyTensor(tensor_);
}

AclScalar::AclScalar(double value) {
  scalar_ = runtime().aclnn().aclCreateScalar(&value, ACL_DOUBLE);
  if (scalar_ == nullptr) fail(H2_STATUS_INTERNAL, "aclCreateScalar failed");
}

AclScalar::~AclScalar() {
  runtime().aclnn().aclDestroyScalar(scalar_);
}

AclIntArray::AclIntArray(const std::vector<int64_t>& values) {
  array_ = runtime().aclnn().aclCreateIntArray(values.data(), values.size());
  if (array_ == nullptr) fail(H2_STATUS_INTERNAL, "aclCreateIntArray failed");
}

AclIntArray::~AclIntArray() {
  runtime().aclnn().aclDestroyIntArray(array_);
}

BoolMask::BoolMask(Stream& stream, const H2_Tensor& tensor) : mask(tensor) {
  if (tensor.dtype == H2_DTYPE_BOOL) return;
  copy.emplace(stream, H2_DTYPE_BOOL, std::vector<int64_t>(tensor.shape, tensor.shape + tensor.rank));
  copy_tensor(stream, copy->tensor, tensor);
  mask = copy->tensor;
}

void copy_tensor(Stream& stream, const H2_Tensor& y, const H2_Tensor& x) {
  const AclnnLibrary& nn = runtime().aclnn();
  AclTensor to(y), from(x);
  run_aclnn(
      stream, "aclnnInplaceCopy",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return nn.aclnnInplaceCopyWorkspace(to.get(), from.get(), size, executor);
      },
      nn.aclnnInplaceCopy);
}

namespace {

// aclnn's own codes (161xxx: the plugin described something wrongly, 561xxx: inside the library) are
// the plugin's fault; a runtime code (a lost device) keeps its meaning.
H2_Status aclnn_status(aclnnStatus code) {
  if (code / 1000 == 161 || code / 1000 == 561) return H2_STATUS_INTERNAL;
  return status_of(code);
}

}  // namespace

void run_aclnn(Stream& stream, const char* name, const std::function<aclnnStatus(uint64_t*, aclOpExecutor**)>& plan,
               aclnnRunFn run) {
  const Runtime& r = runtime();
  r.bind(stream.device);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus planned = plan(&workspace_size, &executor);
  if (planned != ACLNN_SUCCESS) {
    const char* detail = r.acl().aclGetRecentErrMsg();
    fail(aclnn_status(planned), std::string(name) + "GetWorkspaceSize failed with aclnn status " +
                                    std::to_string(planned) + (detail ? std::string(": ") + detail : ""));
  }
  StreamScratch workspace(stream, workspace_size);
  const aclnnStatus ran = run(workspace.data(), workspace_size, executor, stream.stream);
  if (ran != ACLNN_SUCCESS) {
    const char* detail = r.acl().aclGetRecentErrMsg();
    fail(aclnn_status(ran),
         std::string(name) + " failed with status " + std::to_string(ran) + (detail ? std::string(": ") + detail : ""));
  }
}

}  // namespace h2::ascend
