// libnnopbase.so of the emulated CANN runtime: tensor and scalar descriptors, and the executors of
// aclnn's two-phase calls (each usable once, checked against its workspace).
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <type_traits>

#include "aclnn_internal.hpp"

namespace ascend_emulator {
namespace {

std::mutex executors_mutex;
std::set<const aclOpExecutor*> live_executors;

}  // namespace

aclnnStatus plan_operator(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, uint64_t workspace_bytes,
                          const std::function<std::function<void(void*)>()>& plan) noexcept {
  const std::string call = std::string(op) + "GetWorkspaceSize";
  return guarded(call.c_str(), [&] {
    if (workspace_size == nullptr || executor == nullptr)
      throw Error(ACLNN_ERR_PARAM_NULLPTR, "workspaceSize or executor is NULL");
    auto* planned = new aclOpExecutor{op, workspace_bytes, plan()};
    {
      std::lock_guard lock(executors_mutex);
      live_executors.insert(planned);
    }
    *workspace_size = workspace_bytes;
    *executor = planned;
  });
}

aclnnStatus run_operator(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                         aclrtStream stream) noexcept {
  return guarded(op, [&] {
    {
      std::lock_guard lock(executors_mutex);
      if (live_executors.erase(executor) == 0)
        throw Error(ACLNN_ERR_PARAM_INVALID,
                    "the executor is not live: an executor runs once (was it run already, or from another operator?)");
    }
    std::unique_ptr<aclOpExecutor> owned(executor);
    if (owned->name != op) throw Error(ACLNN_ERR_PARAM_INVALID, "the executor was planned by " + owned->name);
    if (workspace_size < owned->workspace_bytes)
      throw Error(ACLNN_ERR_PARAM_INVALID, "the workspace has " + std::to_string(workspace_size) + " bytes, " +
                                               std::to_string(owned->workspace_bytes) + " were asked for");
    if (owned->workspace_bytes > 0 && (workspace == nullptr || !is_device_memory(workspace, owned->workspace_bytes)))
      throw Error(ACLNN_ERR_PARAM_INVALID, "the workspace is not device memory of the asked size");
    auto kernel = std::move(owned->kernel);
    const uint64_t bytes = owned->workspace_bytes;
    launch(stream, owned->name, [kernel = std::move(kernel), workspace, bytes] {
      kernel(bytes > 0 ? device_view(workspace, bytes) : nullptr);
    });
  });
}

}  // namespace ascend_emulator

using namespace ascend_emulator;
#define EXPORT extern "C" ASCEND_EMULATOR_EXPORT

EXPORT aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                                  const int64_t* stride, int64_t offset, aclFormat format, const int64_t* storage_dims,
                                  uint64_t storage_dims_num, void* data) {
  aclTensor* created = nullptr;
  guarded("aclCreateTensor", [&] {
    if ((view_dims_num > 0 && (view_dims == nullptr || stride == nullptr)) ||
        (storage_dims_num > 0 && storage_dims == nullptr))
      throw Error(ACLNN_ERR_PARAM_NULLPTR, "a dimension array is NULL");
    if (view_dims_num > 8 || storage_dims_num > 8) throw Error(ACLNN_ERR_PARAM_INVALID, "more than 8 dimensions");
    if (format != ACL_FORMAT_ND) throw Error(ACLNN_ERR_PARAM_INVALID, "only ACL_FORMAT_ND is emulated");
    if (offset < 0) throw Error(ACLNN_ERR_PARAM_INVALID, "a negative offset");
    auto tensor = std::make_unique<aclTensor>();
    tensor->view.assign(view_dims, view_dims + view_dims_num);
    tensor->strides.assign(stride, stride + view_dims_num);
    tensor->storage.assign(storage_dims, storage_dims + storage_dims_num);
    tensor->offset = offset;
    tensor->dtype = data_type;
    tensor->format = format;
    tensor->data = data;
    for (size_t d = 0; d < tensor->view.size(); ++d)
      if (tensor->view[d] < 0 || tensor->strides[d] < 0)
        throw Error(ACLNN_ERR_PARAM_INVALID, "a negative size or stride in dimension " + std::to_string(d));
    created = tensor.release();
  });
  return created;
}

EXPORT aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

EXPORT aclScalar* aclCreateScalar(void* value, aclDataType data_type) {
  if (value == nullptr) return nullptr;
  auto* scalar = new aclScalar{data_type, 0};
  switch (data_type) {
    case ACL_FLOAT: scalar->value = *static_cast<const float*>(value); break;
    case ACL_DOUBLE: scalar->value = *static_cast<const double*>(value); break;
    case ACL_INT32: scalar->value = *static_cast<const int32_t*>(value); break;
    case ACL_INT64: scalar->value = static_cast<double>(*static_cast<const int64_t*>(value)); break;
    default:
      delete scalar;
      set_recent_error("aclCreateScalar: only FLOAT, DOUBLE, INT32 and INT64 scalars are emulated");
      return nullptr;
  }
  return scalar;
}

EXPORT aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  delete scalar;
  return ACLNN_SUCCESS;
}

EXPORT aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (value == nullptr && size > 0) return nullptr;
  return new aclIntArray{std::vector<int64_t>(value, value + size)};
}

EXPORT aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

EXPORT aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  if (value == nullptr && size > 0) return nullptr;
  return new aclBoolArray{std::vector<bool>(value, value + size)};
}

EXPORT aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

static_assert(std::is_same_v<decltype(&aclCreateBoolArray), aclCreateBoolArrayFn>);
static_assert(std::is_same_v<decltype(&aclDestroyBoolArray), aclDestroyBoolArrayFn>);
static_assert(std::is_same_v<decltype(&aclCreateIntArray), aclCreateIntArrayFn>);
static_assert(std::is_same_v<decltype(&aclDestroyIntArray), aclDestroyIntArrayFn>);
static_assert(std::is_same_v<decltype(&aclCreateTensor), aclCreateTensorFn>);
static_assert(std::is_same_v<decltype(&aclDestroyTensor), aclDestroyTensorFn>);
static_assert(std::is_same_v<decltype(&aclCreateScalar), aclCreateScalarFn>);
static_assert(std::is_same_v<decltype(&aclDestroyScalar), aclDestroyScalarFn>);
