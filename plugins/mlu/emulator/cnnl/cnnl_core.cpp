// The emulated CNNL's handles and tensor descriptors, the checks every operator makes, and its error
// texts. CNNL has only a static text per status; the emulator appends what the calling thread's last
// failed call found, so a test's message says more than the code.
#include <string>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

thread_local cnnlStatus_t last_status = CNNL_STATUS_SUCCESS;
thread_local std::string last_detail;
thread_local std::string status_text;

cnnlStatus_t failed(const char* name, cnnlStatus_t status, const std::string& what) {
  last_status = status;
  last_detail = std::string(name) + ": " + what;
  return status;
}

cnnlStatus_t guarded(const char* name, const std::function<void()>& body) noexcept {
  try {
    body();
    return CNNL_STATUS_SUCCESS;
  } catch (const Error& e) {
    // CNRT's codes (a queue of another device, a lost device) become CNNL's execution failure.
    const int code = e.code();
    const bool cnnl_code = code >= CNNL_STATUS_NOT_INITIALIZED && code <= CNNL_STATUS_NUMERICAL_OVERFLOW;
    return failed(name, cnnl_code ? static_cast<cnnlStatus_t>(code) : CNNL_STATUS_EXECUTION_FAILED, e.what());
  } catch (const std::bad_alloc&) {
    return failed(name, CNNL_STATUS_ALLOC_FAILED, "host out of memory");
  } catch (const std::exception& e) {
    return failed(name, CNNL_STATUS_INTERNAL_ERROR, e.what());
  }
}

const char* static_text(cnnlStatus_t status) {
  switch (status) {
    case CNNL_STATUS_SUCCESS: return "CNNL_STATUS_SUCCESS";
    case CNNL_STATUS_NOT_INITIALIZED: return "CNNL_STATUS_NOT_INITIALIZED";
    case CNNL_STATUS_ALLOC_FAILED: return "CNNL_STATUS_ALLOC_FAILED";
    case CNNL_STATUS_BAD_PARAM: return "CNNL_STATUS_BAD_PARAM";
    case CNNL_STATUS_INTERNAL_ERROR: return "CNNL_STATUS_INTERNAL_ERROR";
    case CNNL_STATUS_ARCH_MISMATCH: return "CNNL_STATUS_ARCH_MISMATCH";
    case CNNL_STATUS_EXECUTION_FAILED: return "CNNL_STATUS_EXECUTION_FAILED";
    case CNNL_STATUS_NOT_SUPPORTED: return "CNNL_STATUS_NOT_SUPPORTED";
    case CNNL_STATUS_NUMERICAL_OVERFLOW: return "CNNL_STATUS_NUMERICAL_OVERFLOW";
    default: return "unknown CNNL status";
  }
}

}  // namespace

int64_t Operand::count() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void bad_param(const std::string& message) {
  throw Error(CNNL_STATUS_BAD_PARAM, message);
}

size_t* checked_size(size_t* size) {
  if (!size) bad_param("size is NULL");
  return size;
}

float host_float(const void* scalar, const char* role) {
  if (!scalar) bad_param(std::string(role) + " is NULL");
  return *static_cast<const float*>(scalar);
}

void not_supported(const std::string& message) {
  throw Error(CNNL_STATUS_NOT_SUPPORTED, message);
}

Operand operand(const cnnlTensorDescriptor_t desc, const void* data, const char* role) {
  if (desc == nullptr || !desc->set) bad_param(std::string(role) + "'s descriptor is NULL or not set");
  if (data == nullptr) bad_param(std::string(role) + " is NULL");
  Operand t{desc->dtype, desc->dims, desc->strides, data};
  int64_t last = 0;
  for (size_t d = 0; d < t.dims.size(); ++d)
    if (t.dims[d] > 0) last += (t.dims[d] - 1) * t.strides[d];
  const size_t bytes = static_cast<size_t>(last + 1) * dtype_bytes(t.dtype);
  if (t.count() > 0 && !is_device_memory(data, bytes))
    bad_param(std::string(role) + " " + shape_text(t.dims) + " with strides " + shape_text(t.strides) +
              " reaches outside its device allocation (or is not device memory)");
  return t;
}

Operand optional_operand(const cnnlTensorDescriptor_t desc, const void* data, const char* role) {
  if (desc == nullptr && data == nullptr) return Operand{};
  return operand(desc, data, role);
}

void check_workspace(const void* workspace, size_t size) {
  if (size == 0) return;
  if (workspace == nullptr) bad_param("the workspace is NULL but its size is " + std::to_string(size));
  if (!is_device_memory(workspace, size)) bad_param("the workspace is not device memory of its size");
}

cnnlStatus_t call(const char* name, cnnlHandle_t handle,
                  const std::function<void(const std::function<void(std::function<void()>)>&)>& body) noexcept {
  return guarded(name, [&] {
    if (handle == nullptr) throw Error(CNNL_STATUS_NOT_INITIALIZED, "the handle is NULL");
    if (handle->queue == nullptr) bad_param("the handle has no queue (cnnlSetQueue)");
    const int32_t device = current_device();
    if (handle->device != device || queue_device(handle->queue) != device)
      throw Error(CNNL_STATUS_EXECUTION_FAILED,
                  "the handle and its queue belong to device " + std::to_string(handle->device) +
                      " but the calling thread's current device is " + std::to_string(device));
    const std::string kernel_name = name;
    body([&](std::function<void()> kernel) {
      launch(handle->queue, kernel_name, [kernel = std::move(kernel), kernel_name] {
        try {
          kernel();
        } catch (const Error& e) {
          throw Error(cnrtErrorKernelTrap, kernel_name + ": " + e.what());
        }
      });
    });
  });
}

cnnlStatus_t call(const char* name, const std::function<void()>& body) noexcept {
  return guarded(name, body);
}

}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C const char* cnnlGetErrorString(cnnlStatus_t status) {
  status_text = static_text(status);
  if (status != CNNL_STATUS_SUCCESS && status == last_status && !last_detail.empty())
    status_text += " (emulated MLU: " + last_detail + ")";
  return status_text.c_str();
}

CNNL_EMULATOR_C cnnlStatus_t cnnlCreate(cnnlHandle_t* handle) {
  return call("cnnlCreate", [&] {
    if (!handle) bad_param("handle is NULL");
    *handle = new cnnlContext{current_device(), nullptr};
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroy(cnnlHandle_t handle) {
  return call("cnnlDestroy", [&] {
    if (!handle) bad_param("handle is NULL");
    delete handle;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetQueue(cnnlHandle_t handle, cnrtQueue_t queue) {
  return call("cnnlSetQueue", [&] {
    if (!handle) bad_param("handle is NULL");
    const int32_t device = queue_device(queue);
    if (device != handle->device)
      bad_param("the queue belongs to device " + std::to_string(device) + ", the handle to device " +
                std::to_string(handle->device));
    handle->queue = queue;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetQueue(cnnlHandle_t handle, cnrtQueue_t* queue) {
  return call("cnnlGetQueue", [&] {
    if (!handle || !queue) bad_param("handle or queue is NULL");
    *queue = handle->queue;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlCreateTensorDescriptor(cnnlTensorDescriptor_t* desc) {
  return call("cnnlCreateTensorDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    *desc = new cnnlTensorStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroyTensorDescriptor(cnnlTensorDescriptor_t desc) {
  return call("cnnlDestroyTensorDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    delete desc;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetTensorDescriptorEx_v2(cnnlTensorDescriptor_t desc, cnnlTensorLayout_t layout,
                                                          cnnlDataType_t dtype, int dim_count, const int64_t dims[],
                                                          const int64_t strides[]) {
  return call("cnnlSetTensorDescriptorEx_v2", [&] {
    if (!desc) bad_param("desc is NULL");
    if (layout != CNNL_LAYOUT_ARRAY) not_supported("only CNNL_LAYOUT_ARRAY is emulated");
    if (dtype_bytes(dtype) == 0) bad_param(dtype_text(dtype) + " is not a data type");
    if (dim_count < 0 || dim_count > CNNL_DIM_MAX)
      bad_param("dim_count " + std::to_string(dim_count) + " is outside [0, CNNL_DIM_MAX]");
    if (dim_count > 0 && (!dims || !strides)) bad_param("dims or strides is NULL");
    desc->dims.assign(dims, dims + dim_count);
    desc->strides.assign(strides, strides + dim_count);
    for (int d = 0; d < dim_count; ++d)
      if (dims[d] < 0 || strides[d] < 0)
        bad_param("dimension " + std::to_string(d) + " has size " + std::to_string(dims[d]) + " and stride " +
                  std::to_string(strides[d]) + ": both must be >= 0");
    desc->dtype = dtype;
    desc->onchip = CNNL_DTYPE_INVALID;
    desc->set = true;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetTensorDescriptorOnchipDataType(cnnlTensorDescriptor_t desc,
                                                                   cnnlDataType_t onchip_dtype) {
  return call("cnnlSetTensorDescriptorOnchipDataType", [&] {
    if (!desc || !desc->set) bad_param("desc is NULL or not set");
    if (!is_floating(onchip_dtype) && onchip_dtype != desc->dtype)
      bad_param("on-chip " + dtype_text(onchip_dtype) + " for " + dtype_text(desc->dtype) + " data");
    desc->onchip = onchip_dtype;
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlGetErrorString);
H2_CHECK_SIGNATURE(cnnlCreate);
H2_CHECK_SIGNATURE(cnnlDestroy);
H2_CHECK_SIGNATURE(cnnlSetQueue);
H2_CHECK_SIGNATURE(cnnlGetQueue);
H2_CHECK_SIGNATURE(cnnlCreateTensorDescriptor);
H2_CHECK_SIGNATURE(cnnlDestroyTensorDescriptor);
H2_CHECK_SIGNATURE(cnnlSetTensorDescriptorEx_v2);
H2_CHECK_SIGNATURE(cnnlSetTensorDescriptorOnchipDataType);
