#include "acl_staging.hpp"

#include "acl_error.hpp"

namespace h2::ascend {

void* AclStagingRuntime::allocate_pinned(size_t bytes) {
  void* buffer = nullptr;
  H2_ACL(acl_, aclrtMallocHost, &buffer, bytes);
  return buffer;
}

void AclStagingRuntime::free_pinned(void* ptr) noexcept {
  acl_.aclrtFreeHost(ptr);
}

void AclStagingRuntime::copy_async(void* stream, void* dst, const void* src, size_t bytes, bool to_device) {
  H2_ACL(acl_, aclrtMemcpyAsync, dst, bytes, src, bytes,
         to_device ? ACL_MEMCPY_HOST_TO_DEVICE : ACL_MEMCPY_DEVICE_TO_HOST, static_cast<aclrtStream>(stream));
}

void AclStagingRuntime::enqueue_host_call(void* stream, void (*fn)(void*), void* data, bool later_work_waits) {
  H2_ACL(acl_, aclrtLaunchCallback, fn, data, later_work_waits ? ACL_CALLBACK_BLOCK : ACL_CALLBACK_NO_BLOCK,
         static_cast<aclrtStream>(stream));
}

}  // namespace h2::ascend
