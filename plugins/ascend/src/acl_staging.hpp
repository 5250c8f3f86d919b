// Pageable host copies through page-locked staging (plugins/common/host_staging.hpp) on AscendCL: with
// other host memory an asynchronous copy fails unpredictably when it runs (CANN 8.0.0), so the
// plugin stages them; host calls are aclrtLaunchCallback on the stream (BLOCK when later work waits),
// run by the device's callback thread.
#pragma once

#include "acl_library.hpp"
#include "host_staging.hpp"  // plugins/common

namespace h2::ascend {

class AclStagingRuntime : public h2::plugin::StagingRuntime {
 public:
  explicit AclStagingRuntime(const AclLibrary& acl) : acl_(acl) {}
  void* allocate_pinned(size_t bytes) override;
  void free_pinned(void* ptr) noexcept override;
  void copy_async(void* stream, void* dst, const void* src, size_t bytes, bool to_device) override;
  void enqueue_host_call(void* stream, void (*fn)(void*), void* data, bool later_work_waits) override;

 private:
  const AclLibrary& acl_;
};

}  // namespace h2::ascend
