#include "h2/stream.hpp"

#include <type_traits>
#include <utility>

#include "h2/error.hpp"
#include "h2/log.hpp"
#include "plugin_handle.hpp"

namespace h2 {

namespace {

// Checks that [offset, offset + bytes) lies inside `buffer` and returns the device pointer there.
void* range_in(const DeviceBuffer& buffer, size_t offset, size_t bytes, const char* call, const char* role) {
  if (!buffer) throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": the " + role + " buffer is empty");
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": " + role + " range [" + std::to_string(offset) +
                                                ", " + std::to_string(offset) + " + " + std::to_string(bytes) +
                                                ") is outside its " + std::to_string(buffer.size()) + "-byte buffer");
  return static_cast<char*>(buffer.data()) + offset;
}

void require_same_device(const Device& stream_device, const DeviceBuffer& buffer, const char* call) {
  if (!(buffer.device() == stream_device))
    throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": the buffer is on " + buffer.device().label() +
                                                " but the stream is on " + stream_device.label());
}

}  // namespace

namespace detail {

namespace {
const char* destroy_name(H2_Stream*) {
  return "stream_destroy";
}
const char* destroy_name(H2_Event*) {
  return "event_destroy";
}
H2_Status destroy(const H2_PluginApi& api, H2_Stream* stream) {
  return api.stream_destroy(stream);
}
H2_Status destroy(const H2_PluginApi& api, H2_Event* event) {
  return api.event_destroy(event);
}
}  // namespace

template <typename Native>
OwnedHandle<Native>::~OwnedHandle() {
  if (native_ == nullptr) return;
  const auto& plugin = device_.plugin();
  if constexpr (std::is_same_v<Native, H2_Stream>) {
    // Drained first, so that what the allocator cached for this stream is free for any stream: no
    // work of this stream can still use it, and none can be enqueued on it any more.
    plugin->api().stream_synchronize(native_);  // a sticky error is the stream owner's to have seen
    try {
      plugin->allocator(device_.index()).stream_retired(native_);
    } catch (const std::exception& e) {
      log(LogLevel::error, plugin->name(), std::string("retiring a stream's cached memory: ") + e.what());
    }
  }
  if (destroy(plugin->api(), native_) != H2_STATUS_OK)
    log(LogLevel::error, plugin->name(), std::string(destroy_name(native_)) + " failed: " + plugin->api().last_error());
}

template <typename Native>
OwnedHandle<Native>::OwnedHandle(OwnedHandle&& other) noexcept
    : device_(other.device_), native_(std::exchange(other.native_, nullptr)) {}

template <typename Native>
OwnedHandle<Native>& OwnedHandle<Native>::operator=(OwnedHandle&& other) noexcept {
  if (this != &other) {
    OwnedHandle old(std::move(*this));  // destroys what this held
    device_ = other.device_;
    native_ = std::exchange(other.native_, nullptr);
  }
  return *this;
}

template class OwnedHandle<H2_Stream>;
template class OwnedHandle<H2_Event>;

}  // namespace detail

void Stream::memset(DeviceBuffer& dst, uint8_t value, size_t offset, size_t bytes) {
  if (bytes == kToEnd) bytes = offset <= dst.size() ? dst.size() - offset : 0;
  void* target = range_in(dst, offset, bytes, "memset", "destination");
  require_same_device(device_, dst, "memset");
  if (bytes == 0) return;
  device_.plugin()->check(device_.plugin()->api().memset_async(native(), target, value, bytes), "memset_async");
}

void Stream::copy_from_host(DeviceBuffer& dst, const void* src, size_t bytes, size_t dst_offset) {
  void* target = range_in(dst, dst_offset, bytes, "copy_from_host", "destination");
  require_same_device(device_, dst, "copy_from_host");
  if (bytes == 0) return;
  if (src == nullptr) throw Error(H2_STATUS_INVALID_ARGUMENT, "copy_from_host: the host source is null");
  device_.plugin()->check(device_.plugin()->api().memcpy_async(native(), target, src, bytes, H2_MEMCPY_HOST_TO_DEVICE),
                          "memcpy_async(host to device)");
}

void Stream::copy_to_host(void* dst, const DeviceBuffer& src, size_t bytes, size_t src_offset) {
  void* source = range_in(src, src_offset, bytes, "copy_to_host", "source");
  require_same_device(device_, src, "copy_to_host");
  if (bytes == 0) return;
  if (dst == nullptr) throw Error(H2_STATUS_INVALID_ARGUMENT, "copy_to_host: the host destination is null");
  device_.plugin()->check(device_.plugin()->api().memcpy_async(native(), dst, source, bytes, H2_MEMCPY_DEVICE_TO_HOST),
                          "memcpy_async(device to host)");
}

void Stream::copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes) {
  void* target = range_in(dst, dst_offset, bytes, "copy", "destination");
  void* source = range_in(src, src_offset, bytes, "copy", "source");
  if (!dst.device().same_plugin(device_) || !src.device().same_plugin(device_))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "copy: device-to-device copies stay inside one plugin (" +
                                                src.device().label() + " -> " + dst.device().label() + " on a " +
                                                device_.plugin_name() + " stream); stage through the host");
  if (bytes == 0) return;
  if (dst.data() == src.data() && dst_offset < src_offset + bytes && src_offset < dst_offset + bytes)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "copy: source and destination ranges overlap");
  device_.plugin()->check(
      device_.plugin()->api().memcpy_async(native(), target, source, bytes, H2_MEMCPY_DEVICE_TO_DEVICE),
      "memcpy_async(device to device)");
}

void Stream::wait(const Event& event) {
  if (!event.device().same_plugin(device_))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "wait: the event is on " + event.device().label() +
                                                ", another plugin than the stream's " + device_.label());
  device_.plugin()->check(device_.plugin()->api().stream_wait_event(native(), event.native()), "stream_wait_event");
}

Stream::Stream(Stream&& other) noexcept
    : OwnedHandle(std::move(other)),
      enqueued_(other.enqueued_.load(std::memory_order_acquire)),
      idle_at_(other.idle_at_.load(std::memory_order_acquire)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    enqueued_.store(other.enqueued_.load(std::memory_order_acquire), std::memory_order_release);
    idle_at_.store(other.idle_at_.load(std::memory_order_acquire), std::memory_order_release);
    OwnedHandle::operator=(std::move(other));
  }
  return *this;
}

void Stream::synchronize() {
  const uint64_t enqueued = enqueued_.load(std::memory_order_acquire);
  device_.plugin()->check(device_.plugin()->api().stream_synchronize(native_), "stream_synchronize");
  idle_at_.store(enqueued, std::memory_order_release);
}

bool Stream::ready() {
  // Read before asking: work enqueued meanwhile (another thread's) leaves the counts apart.
  const uint64_t enqueued = enqueued_.load(std::memory_order_acquire);
  if (idle_at_.load(std::memory_order_acquire) == enqueued) return true;
  H2_Status status = device_.plugin()->api().stream_query(native_);
  if (status == H2_STATUS_NOT_READY) return false;
  device_.plugin()->check(status, "stream_query");
  idle_at_.store(enqueued, std::memory_order_release);
  return true;
}

void Event::record(Stream& stream) {
  if (!stream.device().same_plugin(device_))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "record: the stream is on " + stream.device().label() +
                                                ", another plugin than the event's " + device_.label());
  device_.plugin()->check(device_.plugin()->api().event_record(native_, stream.native()), "event_record");
}

bool Event::ready() {
  H2_Status status = device_.plugin()->api().event_query(native_);
  if (status == H2_STATUS_NOT_READY) return false;
  device_.plugin()->check(status, "event_query");
  return true;
}

void Event::synchronize() {
  device_.plugin()->check(device_.plugin()->api().event_synchronize(native_), "event_synchronize");
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  const auto& plugin = start.device_.plugin();
  if (!end.device_.same_plugin(start.device_))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "elapsed_ms: the events belong to different plugins");
  auto slot = plugin->require(plugin->api().event_elapsed_ms, "event_elapsed_ms");
  float ms = 0;
  plugin->check(slot(start.native_, end.native_, &ms), "event_elapsed_ms");
  return ms;
}

}  // namespace h2
