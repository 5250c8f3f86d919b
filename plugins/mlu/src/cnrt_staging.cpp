#include "cnrt_staging.hpp"

#include "mlu_error.hpp"

namespace h2::mlu {

void* CnrtStagingRuntime::allocate_pinned(size_t bytes) {
  void* buffer = nullptr;
  H2_CNRT(cnrt_, cnrtHostMalloc, &buffer, bytes);
  return buffer;
}

void CnrtStagingRuntime::free_pinned(void* ptr) noexcept {
  cnrt_.cnrtFreeHost(ptr);
}

void CnrtStagingRuntime::copy_async(void* queue, void* dst, const void* src, size_t bytes, bool to_device) {
  H2_CNRT(cnrt_, cnrtMemcpyAsync_V2, dst, const_cast<void*>(src), bytes, static_cast<cnrtQueue_t>(queue),
          to_device ? cnrtMemcpyHostToDev : cnrtMemcpyDevToHost);
}

void CnrtStagingRuntime::enqueue_host_call(void* queue, void (*fn)(void*), void* data, bool /*later_work_waits*/) {
  // The queue's later work waits for a host function in either case.
  H2_CNRT(cnrt_, cnrtInvokeHostFunc, static_cast<cnrtQueue_t>(queue), fn, data);
}

}  // namespace h2::mlu
