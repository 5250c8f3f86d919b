// Copies between device memory and pageable host memory for runtimes that copy asynchronously only
// from and to page-locked memory (AscendCL, CNRT), while the ABI's memcpy_async takes any host buffer
// without blocking. Such a copy goes through a page-locked staging buffer: to the device, the host
// bytes are copied into it at once and the device copy is enqueued; to the host, the device copy
// into it is enqueued and then a host call on the stream that later work waits for copies it out, so
// later work on the stream (an event the caller waits for, say) sees the bytes in place. Buffers are
// pooled by size class; a host call only hands its buffer back, because host calls may not call the
// vendor's runtime.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace h2::plugin {

// What HostStaging needs from a vendor runtime. `stream` is the vendor's stream or queue handle. Each
// call throws the plugin's error on failure.
class StagingRuntime {
 public:
  virtual ~StagingRuntime() = default;
  virtual void* allocate_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* ptr) noexcept = 0;
  // Enqueues a copy of `bytes` bytes between pinned host memory and device memory.
  virtual void copy_async(void* stream, void* dst, const void* src, size_t bytes, bool to_device) = 0;
  // Enqueues fn(data) on `stream` after the work enqueued so far; with `later_work_waits`, work
  // enqueued afterwards starts only once fn has returned.
  virtual void enqueue_host_call(void* stream, void (*fn)(void*), void* data, bool later_work_waits) = 0;
};

class HostStaging {
 public:
  explicit HostStaging(StagingRuntime& runtime) : runtime_(runtime) {}
  ~HostStaging();  // frees every buffer: call it once no stream has a staged copy pending
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Both enqueue on `stream`, whose device must be current on the calling thread.
  void to_device(void* stream, void* dst, const void* src, size_t bytes);
  void to_host(void* stream, void* dst, const void* src, size_t bytes);

 private:
  struct Staged;
  static void finish(void* staged);  // the host call

  void* acquire(size_t size_class);
  void give_back(void* buffer, size_t size_class);

  StagingRuntime& runtime_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> idle_;  // size class -> buffer
  std::vector<void*> all_;
};

}  // namespace h2::plugin
