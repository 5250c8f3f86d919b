// RAII owners of device memory and pinned host memory. Move-only; the memory is freed when the
// owner is destroyed. Freeing device memory waits for work already queued (see mem_free in
// plugin_abi.h), so a buffer can be dropped right after enqueuing work on it.
#pragma once

#include <cstddef>
#include <optional>

#include "h2/device.hpp"

namespace h2 {

namespace detail {

// Memory handed out by a plugin, with the call that gives it back.
class Allocation {
 public:
  using FreeFn = void (*)(const Device& device, void* data);

  Allocation() = default;
  Allocation(Device device, void* data, size_t bytes, FreeFn free_fn)
      : device_(std::move(device)), data_(data), bytes_(bytes), free_fn_(free_fn) {}
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

 private:
  std::optional<Device> device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_fn_ = nullptr;
};

}  // namespace detail

// Device memory. data() is a device pointer: opaque to host code, only to be passed to H2 calls.
class DeviceBuffer : public detail::Allocation {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, void* data, size_t bytes);
  // Memory another process exported, from mem_import: given back with mem_close, not mem_free.
  static DeviceBuffer imported(Device device, void* data, size_t bytes);

 private:
  DeviceBuffer(Device device, void* data, size_t bytes, FreeFn free_fn)
      : Allocation(std::move(device), data, bytes, free_fn) {}
};

// Pinned host memory: host code may read and write data() directly.
class PinnedHostBuffer : public detail::Allocation {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(Device device, void* data, size_t bytes);
};

}  // namespace h2
