#include "host_staging.hpp"

#include <bit>
#include <cstring>

#include "acl_error.hpp"

namespace h2::ascend {
namespace {

constexpr size_t kSmallestBuffer = size_t{64} << 10;

size_t size_class(size_t bytes) {
  return std::bit_ceil(bytes < kSmallestBuffer ? kSmallestBuffer : bytes);
}

}  // namespace

// What a callback needs: the buffer to hand back and, for a copy to the host, where the bytes go.
struct HostStaging::Staged {
  HostStaging* staging;
  void* buffer;
  size_t size_class;
  void* host_destination;  // NULL for a copy to the device
  size_t bytes;
};

HostStaging::~HostStaging() {
  for (void* buffer : all_) acl_.aclrtFreeHost(buffer);
}

void* HostStaging::acquire(size_t size_class) {
  {
    std::lock_guard lock(mutex_);
    auto it = idle_.find(size_class);
    if (it != idle_.end()) {
      void* buffer = it->second;
      idle_.erase(it);
      return buffer;
    }
  }
  void* buffer = nullptr;
  H2_ACL(acl_, aclrtMallocHost, &buffer, size_class);
  std::lock_guard lock(mutex_);
  all_.push_back(buffer);
  return buffer;
}

void HostStaging::give_back(void* buffer, size_t size_class) {
  std::lock_guard lock(mutex_);
  idle_.emplace(size_class, buffer);
}

void HostStaging::finish(void* data) {
  auto* staged = static_cast<Staged*>(data);
  if (staged->host_destination != nullptr) std::memcpy(staged->host_destination, staged->buffer, staged->bytes);
  staged->staging->give_back(staged->buffer, staged->size_class);
  delete staged;
}

void HostStaging::to_device(aclrtStream stream, void* dst, const void* src, size_t bytes) {
  const size_t size = size_class(bytes);
  auto* staged = new Staged{this, acquire(size), size, nullptr, bytes};
  try {
    std::memcpy(staged->buffer, src, bytes);
    H2_ACL(acl_, aclrtMemcpyAsync, dst, bytes, staged->buffer, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream);
  } catch (...) {
    finish(staged);
    throw;
  }
  // The copy is enqueued: from here the buffer is the stream's until the callback runs.
  H2_ACL(acl_, aclrtLaunchCallback, &HostStaging::finish, staged, ACL_CALLBACK_NO_BLOCK, stream);
}

void HostStaging::to_host(aclrtStream stream, void* dst, const void* src, size_t bytes) {
  const size_t size = size_class(bytes);
  auto* staged = new Staged{this, acquire(size), size, dst, bytes};
  try {
    H2_ACL(acl_, aclrtMemcpyAsync, staged->buffer, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream);
  } catch (...) {
    staged->host_destination = nullptr;
    finish(staged);
    throw;
  }
  H2_ACL(acl_, aclrtLaunchCallback, &HostStaging::finish, staged, ACL_CALLBACK_BLOCK, stream);
}

}  // namespace h2::ascend
