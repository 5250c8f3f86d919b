// RAII owners of device memory and pinned host memory. Move-only; the memory is freed when the
// owner is destroyed, so a buffer can be dropped right after enqueuing work on it. Memory made for a
// stream (Device::allocate(bytes, stream)) goes back to the device's caching allocator without
// waiting, for reuse in that stream's order; other device memory is freed with mem_free, which waits
// for the work already queued (see plugin_abi.h).
#pragma once

#include <cstddef>
#include <optional>

#include "h2/device.hpp"

namespace h2 {

class Stream;

namespace detail {

// Memory handed out by a plugin, with the call that gives it back.
class Allocation {
 public:
  // `token` is what the allocator handed out with the memory, given back with it (or nullptr).
  using FreeFn = void (*)(const Device& device, void* data, void* token);

  Allocation() = default;
  Allocation(Device device, void* data, size_t bytes, FreeFn free_fn, void* token = nullptr)
      : device_(std::move(device)), data_(data), bytes_(bytes), free_fn_(free_fn), token_(token) {}
  ~Allocation();
  Allocation(Allocation&& other) noexcept;
  Allocation& operator=(Allocation&& other) noexcept;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  const Device& device() const { return *device_; }
  explicit operator bool() const { return data_ != nullptr; }

  // Frees now and throws on failure (the destructor logs failures instead).
  void reset();

 protected:
  FreeFn free_fn() const { return free_fn_; }
  void* token() const { return token_; }

 private:
  std::optional<Device> device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_fn_ = nullptr;
  void* token_ = nullptr;
};

}  // namespace detail

// Device memory. data() is a device pointer: opaque to host code, only to be passed to H2 calls.
class DeviceBuffer : public detail::Allocation {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, void* data, size_t bytes);
  // Memory another process exported, from mem_import: given back with mem_close, not mem_free.
  static DeviceBuffer imported(Device device, void* data, size_t bytes);
  // Memory the device's caching allocator handed out for work on a stream.
  static DeviceBuffer stream_ordered(Device device, void* data, size_t bytes, void* token);

  bool is_stream_ordered() const;
  // Work on `stream`, another stream than the one the memory was made for, uses it: freeing it then
  // waits (on the device, not the host) for the work enqueued on `stream` until the free, as torch's
  // Tensor.record_stream. A no-op for memory that is not stream-ordered, whose free waits anyway.
  void record_stream(const Stream& stream) const;

 private:
  DeviceBuffer(Device device, void* data, size_t bytes, FreeFn free_fn, void* token = nullptr)
      : Allocation(std::move(device), data, bytes, free_fn, token) {}
};

// Pinned host memory: host code may read and write data() directly.
class PinnedHostBuffer : public detail::Allocation {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(Device device, void* data, size_t bytes);
};

}  // namespace h2
