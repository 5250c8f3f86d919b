#include "h2/buffer.hpp"

#include <utility>

#include "h2/log.hpp"
#include "h2/stream.hpp"
#include "plugin_handle.hpp"

namespace h2 {

namespace detail {

namespace {
void reset_quietly(Allocation& allocation) noexcept {
  try {
    allocation.reset();
  } catch (const std::exception& e) {
    log(LogLevel::error, "core", e.what());
  }
}
}  // namespace

Allocation::~Allocation() {
  reset_quietly(*this);
}

Allocation::Allocation(Allocation&& other) noexcept
    : device_(std::move(other.device_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      free_fn_(other.free_fn_),
      token_(std::exchange(other.token_, nullptr)) {}

Allocation& Allocation::operator=(Allocation&& other) noexcept {
  if (this != &other) {
    reset_quietly(*this);
    device_ = std::move(other.device_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    free_fn_ = other.free_fn_;
    token_ = std::exchange(other.token_, nullptr);
  }
  return *this;
}

void Allocation::reset() {
  if (data_ == nullptr) return;
  void* data = std::exchange(data_, nullptr);
  bytes_ = 0;
  free_fn_(*device_, data, std::exchange(token_, nullptr));
}

}  // namespace detail

namespace {

void free_device_memory(const Device& device, void* data, void*) {
  const auto& plugin = device.plugin();
  plugin->check(plugin->api().mem_free(device.index(), data),
                "mem_free(device " + std::to_string(device.index()) + ")");
}

void give_back_to_cache(const Device& device, void* data, void* token) {
  device.plugin()->allocator(device.index()).free(data, token);
}

void close_imported_memory(const Device& device, void* data, void*) {
  const auto& plugin = device.plugin();
  plugin->check(plugin->api().mem_close(device.index(), data),
                "mem_close(device " + std::to_string(device.index()) + ")");
}

void free_pinned_host_memory(const Device& device, void* data, void*) {
  const auto& plugin = device.plugin();
  plugin->check(plugin->api().host_free(data), "host_free");
}

}  // namespace

DeviceBuffer::DeviceBuffer(Device device, void* data, size_t bytes)
    : Allocation(std::move(device), data, bytes, free_device_memory) {}

DeviceBuffer DeviceBuffer::imported(Device device, void* data, size_t bytes) {
  return DeviceBuffer(std::move(device), data, bytes, close_imported_memory);
}

DeviceBuffer DeviceBuffer::stream_ordered(Device device, void* data, size_t bytes, void* token) {
  return DeviceBuffer(std::move(device), data, bytes, give_back_to_cache, token);
}

bool DeviceBuffer::is_stream_ordered() const {
  return free_fn() == give_back_to_cache;
}

void DeviceBuffer::record_stream(const Stream& stream) const {
  if (!*this || !is_stream_ordered()) return;
  if (!(stream.device() == device()))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "record_stream: the buffer is on " + device().label() +
                                                " but the stream is on " + stream.device().label());
  device().plugin()->allocator(device().index()).record_stream(data(), token(), stream.handle());
}

PinnedHostBuffer::PinnedHostBuffer(Device device, void* data, size_t bytes)
    : Allocation(std::move(device), data, bytes, free_pinned_host_memory) {}

}  // namespace h2
