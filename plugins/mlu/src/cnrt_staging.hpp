// Pageable host copies through page-locked staging (plugins/common/host_staging.hpp) on CNRT: CNRT
// does not document whether an asynchronous copy from pageable memory returns before it has completed,
// so the plugin copies asynchronously only from and to cnrtHostMalloc memory; host calls are
// cnrtInvokeHostFunc, which the queue's later work always waits for.
#pragma once

#include "cnrt_library.hpp"
#include "host_staging.hpp"

namespace h2::mlu {

class CnrtStagingRuntime : public h2::plugin::StagingRuntime {
 public:
  explicit CnrtStagingRuntime(const CnrtLibrary& cnrt) : cnrt_(cnrt) {}
  void* allocate_pinned(size_t bytes) override;
  void free_pinned(void* ptr) noexcept override;
  void copy_async(void* queue, void* dst, const void* src, size_t bytes, bool to_device) override;
  void enqueue_host_call(void* queue, void (*fn)(void*), void* data, bool later_work_waits) override;

 private:
  const CnrtLibrary& cnrt_;
};

}  // namespace h2::mlu
