#include "host_staging.hpp"

#include <bit>
#include <cstring>

namespace h2::plugin {
namespace {

constexpr size_t kSmallestBuffer = size_t{64} << 10;

size_t size_class(size_t bytes) {
  return std::bit_ceil(bytes < kSmallestBuffer ? kSmallestBuffer : bytes);
}

}  // namespace

// What a host call needs: the buffer to hand back and, for a copy to the host, where the bytes go.
struct HostStaging::Staged {
  HostStaging* staging;
  void* buffer;
  size_t size_class;
  void* host_destination;  // NULL for a copy to the device
  size_t bytes;
};

HostStaging::~HostStaging() {
  for (void* buffer : all_) runtime_.free_pinned(buffer);
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
  void* buffer = runtime_.allocate_pinned(size_class);
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

void HostStaging::to_device(void* stream, void* dst, const void* src, size_t bytes) {
  const size_t size = size_class(bytes);
  auto* staged = new Staged{this, acquire(size), size, nullptr, bytes};
  try {
    std::memcpy(staged->buffer, src, bytes);
    runtime_.copy_async(stream, dst, staged->buffer, bytes, true);
  } catch (...) {
    finish(staged);
    throw;
  }
  // The copy is enqueued: from here the buffer is the stream's until the host call runs.
  runtime_.enqueue_host_call(stream, &HostStaging::finish, staged, false);
}

void HostStaging::to_host(void* stream, void* dst, const void* src, size_t bytes) {
  const size_t size = size_class(bytes);
  auto* staged = new Staged{this, acquire(size), size, dst, bytes};
  try {
    runtime_.copy_async(stream, staged->buffer, src, bytes, false);
  } catch (...) {
    staged->host_destination = nullptr;
    finish(staged);
    throw;
  }
  runtime_.enqueue_host_call(stream, &HostStaging::finish, staged, true);
}

}  // namespace h2::plugin
