// Copies between device memory and pageable host memory. AscendCL copies asynchronously only from
// and to page-locked memory (CANN 8.0.0: with other host memory an asynchronous copy fails
// unpredictably when it runs), while the ABI's memcpy_async takes any host buffer without blocking.
// So such a copy goes through a page-locked staging buffer: to the device, the host bytes are copied
// into it at once and the device copy is enqueued; to the host, the device copy into it is enqueued
// and then a blocking stream callback copies it out, so later work on the stream (an event the
// caller waits for, say) sees the bytes in place. Buffers are pooled by size class; a callback only
// hands its buffer back, because callbacks may not call AscendCL.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "acl_library.hpp"

namespace h2::ascend {

class HostStaging {
 public:
  explicit HostStaging(const AclLibrary& acl) : acl_(acl) {}
  ~HostStaging();  // frees every buffer: call it once no stream has a staged copy pending
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Both enqueue on `stream`, whose device must be current on the calling thread, and need a
  // callback thread subscribed to it.
  void to_device(aclrtStream stream, void* dst, const void* src, size_t bytes);
  void to_host(aclrtStream stream, void* dst, const void* src, size_t bytes);

 private:
  struct Staged;
  static void finish(void* staged);  // the callback

  void* acquire(size_t size_class);
  void give_back(void* buffer, size_t size_class);

  const AclLibrary& acl_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> idle_;  // size class -> buffer
  std::vector<void*> all_;
};

}  // namespace h2::ascend
