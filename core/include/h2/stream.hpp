// Streams and events (CUDA's ordering model). Work enqueued on a stream runs after earlier work on
// the same stream; streams are otherwise unordered unless joined with Event::record + Stream::wait.
// Copies and memsets check their ranges against the buffers before they reach the plugin.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "h2/buffer.hpp"
#include "h2/device.hpp"

struct H2_Stream;
struct H2_Event;

namespace h2 {

class Event;

namespace detail {

// Move-only owner of a plugin's stream or event handle; destroys it through the plugin's table.
template <typename Native>
class OwnedHandle {
 public:
  OwnedHandle(Device device, Native* native) : device_(std::move(device)), native_(native) {}
  ~OwnedHandle();
  OwnedHandle(OwnedHandle&& other) noexcept;
  OwnedHandle& operator=(OwnedHandle&& other) noexcept;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;

  const Device& device() const { return device_; }
  Native* native() const { return native_; }

 protected:
  Device device_;
  Native* native_;
};

extern template class OwnedHandle<H2_Stream>;
extern template class OwnedHandle<H2_Event>;

}  // namespace detail

// Destroying a Stream waits for its pending work; then the memory cached for it may serve any stream.
class Stream : public detail::OwnedHandle<H2_Stream> {
 public:
  Stream(Device device, H2_Stream* native) : OwnedHandle(std::move(device), native) {}
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;

  // The plugin's handle, for enqueuing work through its table (the ops and this class's own methods
  // do); counted as work, so ready() then asks the plugin again.
  H2_Stream* native() const {
    enqueued_.fetch_add(1, std::memory_order_acq_rel);
    return native_;
  }
  // The same handle, not counted as work: for the caching allocator, which orders memory by it.
  H2_Stream* handle() const { return native_; }

  // Sets `bytes` bytes (default: to the end) starting at `offset` of `dst` to `value`.
  void memset(DeviceBuffer& dst, uint8_t value, size_t offset = 0, size_t bytes = kToEnd);
  // Host -> device. `src` is borrowed until the copy has completed (synchronize or an event).
  void copy_from_host(DeviceBuffer& dst, const void* src, size_t bytes, size_t dst_offset = 0);
  // Device -> host. `dst` must not be read until the copy has completed.
  void copy_to_host(void* dst, const DeviceBuffer& src, size_t bytes, size_t src_offset = 0);
  // Device -> device, both buffers of this stream's plugin (any of its devices); no overlap.
  void copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes);

  // Later work on this stream waits for what `event` captured when this is called.
  void wait(const Event& event);
  // Blocks until all work so far has completed; throws the first asynchronous error.
  void synchronize();
  // True when all work so far has completed (a task still running is not complete).
  bool ready();

  static constexpr size_t kToEnd = static_cast<size_t>(-1);

 private:
  // Work handed to the plugin so far, counted, and the count at which the plugin last said it had
  // all completed. While they match, ready() needs no plugin call: DiComm asks before every message,
  // and a query (a handle lookup and a lock in cpu-reference) cost a microsecond there with caches
  // cold, which under BBR's pacing cost a 4 MiB tcp ping-pong 50-100 us (issue 7).
  mutable std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> idle_at_{0};
};

class Event : public detail::OwnedHandle<H2_Event> {
 public:
  using OwnedHandle::OwnedHandle;

  // Captures the work enqueued on `stream` so far.
  void record(Stream& stream);
  bool ready();
  void synchronize();
  // Milliseconds between the completion of `start` and `end`; both must have completed.
  static float elapsed_ms(const Event& start, const Event& end);
};

}  // namespace h2
