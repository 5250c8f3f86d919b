#include "link.hpp"

#include <algorithm>

#include "h2/dicomm/data_paths.hpp"
#include "h2/error.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

Link::Link(const Device& device, size_t piece_bytes, bool force_staging, bool share_memory)
    : device_(device),
      direct_(!force_staging && device_memory_path(device.properties()).direct),
      host_inline_(device.properties().host_accessible),
      // Node peers copy from a mapping with the host's memcpy, so only host-addressable memory.
      share_memory_(share_memory && direct_ && device.can_share_memory()),
      piece_bytes_(piece_bytes),
      // DiComm waits for its copies and reductions as soon as it enqueues them (the next message
      // depends on them), so a device that computes on host threads runs them on the thread that
      // drives progress: no wake-up of a stream worker per piece, and a reduction reads data that
      // thread has just received, from its own cache (issue 7: 16-24% less time for 1-4 MiB
      // allreduces on cpu-reference). Devices whose memory the host cannot address (GPUs, NPUs)
      // get a plain stream: their work runs on the device anyway.
      stream_(device.create_stream({.host_inline = host_inline_})) {}

std::shared_ptr<Event> Link::event_after(Stream& stream) const {
  if (stream.ready()) return nullptr;
  auto event = std::make_shared<Event>(device_.create_event(false));
  event->record(stream);
  return event;
}

void Link::wait_for(Event& ready) {
  if (host_inline_)
    ready.synchronize();
  else
    stream_.wait(ready);
}

std::optional<MemoryExport> Link::shared_location(const DeviceBuffer& buffer, size_t offset) {
  if (!share_memory_) return std::nullopt;
  try {
    return device_.export_memory(buffer, offset);
  } catch (const Error& e) {
    if (e.status() != H2_STATUS_UNSUPPORTED) return std::nullopt;  // this buffer only: it is copied
    share_memory_ = false;
    log(LogLevel::info, "dicomm", device_.label() + "'s memory is copied to node peers, not mapped: " + e.what());
    return std::nullopt;
  }
}

std::shared_ptr<StagingSlot> Link::acquire() {
  if (!free_.empty()) {
    std::shared_ptr<StagingSlot> slot = std::move(free_.back());
    free_.pop_back();
    return slot;
  }
  if (allocated_ >= kMaxSlots) return nullptr;
  ++allocated_;
  auto slot = std::make_shared<StagingSlot>();
  slot->buffer = device_.allocate_pinned_host(piece_bytes_);
  return slot;
}

void Link::release(std::shared_ptr<StagingSlot> slot) {
  slot->copied.reset();
  free_.push_back(std::move(slot));
}

}  // namespace h2::dicomm::detail

namespace h2::dicomm::detail {

Link::Scratch Link::take_scratch(int64_t numel, DType dtype) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(numel, 1)) * dtype_size(dtype);
  {
    std::lock_guard lock(scratch_mutex_);
    // The smallest that fits. Not waiting for its last use to finish: calls issued back to back
    // would otherwise allocate afresh whenever the previous call's last reduction or cast is
    // still queued, which was most of the time for 16-bit data and recursive doubling.
    size_t best = scratch_.size();
    for (size_t i = 0; i < scratch_.size(); ++i)
      if (scratch_[i].first->size() >= bytes &&
          (best == scratch_.size() || scratch_[i].first->size() < scratch_[best].first->size()))
        best = i;
    if (best < scratch_.size()) {
      auto [buffer, done] = std::move(scratch_[best]);
      scratch_.erase(scratch_.begin() + static_cast<std::ptrdiff_t>(best));
      return {Tensor::from_buffer(std::move(buffer), {numel}, dtype), std::move(done)};
    }
  }
  return {Tensor::from_buffer(std::make_shared<DeviceBuffer>(device_.allocate(bytes)), {numel}, dtype), nullptr};
}

void Link::return_scratch(const Tensor& scratch, std::shared_ptr<Event> done) {
  std::lock_guard lock(scratch_mutex_);
  scratch_.emplace_back(scratch.buffer(), std::move(done));
  // Keep a few: a job uses one or two sizes over and over.
  if (scratch_.size() > 4) scratch_.erase(scratch_.begin());
}

}  // namespace h2::dicomm::detail
