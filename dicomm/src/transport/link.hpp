// How one device's memory meets the wire: directly (the NIC reads and writes device memory) or
// staged through pinned host buffers of the device's plugin. One Link per device per process,
// shared by every communicator; its stream carries DiComm's copies and reductions on that device,
// so they never sit in the middle of the caller's own work. The stream is host-inline
// (H2_STREAM_HOST_INLINE): on a device that computes on host threads, enqueuing on it runs the work,
// and a wait on it blocks, so DiComm enqueues only what it is about to wait for anyway.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "h2/buffer.hpp"
#include "h2/device.hpp"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::dicomm::detail {

// Pinned host memory for one piece in flight.
struct StagingSlot {
  PinnedHostBuffer buffer;
  std::shared_ptr<Event> copied;  // the device copy that reads or writes it, when one is pending
};

class Link {
 public:
  // `staged` forces host staging even where the device allows direct access (H2_DICOMM_STAGING=1).
  // `share_memory` lets node peers read this device's memory through a mapping where the plugin
  // can export it (H2_DICOMM_SHARED_MEMORY).
  Link(const Device& device, size_t piece_bytes, bool force_staging, bool share_memory);

  const Device& device() const { return device_; }
  // The NIC reads and writes this device's memory directly.
  bool direct() const { return direct_; }
  Stream& stream() { return stream_; }
  // Makes the Link's later work wait for `ready`. On a host-inline stream an enqueued wait would block
  // while holding the stream, and every transfer on this device (other threads', the engine's) would
  // queue behind the caller's compute: the caller waits on the host instead, holding nothing.
  void wait_for(Event& ready);
  // An event that completes once the work enqueued on `stream` (a stream of this Link's device) so
  // far has run, or null when it has all run already. Most messages find the stream idle, the
  // Link's own host-inline stream always: an event then is a plugin allocation, a record and a query
  // or more for nothing, and on the path from one message's arrival to the next send (issue 7: under
  // BBR's pacing each microsecond there cost a 1 MiB tcp ping-pong 10-15 us).
  std::shared_ptr<Event> event_after(Stream& stream) const;
  size_t piece_bytes() const { return piece_bytes_; }

  // Where byte `offset` of `buffer` lies for a node peer that maps it, or nullopt when this device's
  // memory is not shared (after a failed export it stops trying, and says so once).
  std::optional<MemoryExport> shared_location(const DeviceBuffer& buffer, size_t offset);

  // A free staging slot, or nullptr when `kMaxSlots` are in use (the caller retries later).
  std::shared_ptr<StagingSlot> acquire();
  void release(std::shared_ptr<StagingSlot> slot);

  static constexpr size_t kMaxSlots = 16;

  // Device memory for `numel` elements of `dtype`, reused between calls: fresh memory costs a page
  // fault per page when first touched, and in a VM that alone made a 64 MiB allreduce 5x slower.
  // Give it back with return_scratch once the work using it has been recorded in `done`.
  struct Scratch {
    Tensor tensor;
    // The last use's device work, which may still be queued on stream(): work on stream() runs
    // after it anyway, but the NIC must not write the memory before it has completed.
    std::shared_ptr<Event> last_use;
  };
  Scratch take_scratch(int64_t numel, DType dtype);
  void return_scratch(const Tensor& scratch, std::shared_ptr<Event> done);

 private:
  Device device_;
  bool direct_;
  bool host_inline_;  // the stream was asked to run inline (host-addressable devices only)
  bool share_memory_;
  size_t piece_bytes_;
  Stream stream_;
  std::vector<std::shared_ptr<StagingSlot>> free_;
  size_t allocated_ = 0;
  std::mutex scratch_mutex_;  // collectives of several threads may share the device
  std::vector<std::pair<std::shared_ptr<DeviceBuffer>, std::shared_ptr<Event>>> scratch_;
};

}  // namespace h2::dicomm::detail
