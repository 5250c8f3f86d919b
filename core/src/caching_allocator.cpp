#include "caching_allocator.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

#include "h2/error.hpp"
#include "h2/log.hpp"
#include "plugin_handle.hpp"

namespace h2::detail {

namespace {

std::string byte_text(uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

}  // namespace

// A segment: one plugin allocation, cut into blocks that are linked in address order.
struct CachingAllocator::Segment {
  char* ptr;
  size_t size;
  H2_Stream* stream;  // whose order its blocks follow; nullptr once that stream is gone
  bool small;         // belongs to the small pool
  Block* head = nullptr;
};

struct CachingAllocator::Block {
  enum class State { allocated, pending_events, cached };
  Segment* segment;
  char* ptr;
  size_t size;
  State state = State::cached;
  size_t requested = 0;
  int pending_events = 0;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<H2_Stream*> uses;  // other streams whose work uses the block (record_stream)
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->segment->stream != b->segment->stream) return std::less<H2_Stream*>()(a->segment->stream, b->segment->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocator::CachingAllocator(const PluginHandle& plugin, int device, bool caching)
    : plugin_(plugin),
      device_(device),
      caching_(caching),
      async_(plugin.api().mem_alloc_async != nullptr && plugin.api().mem_free_async != nullptr) {
  stats_.caching = caching;
}

CachingAllocator::~CachingAllocator() {
  try {
    release_cached_segments();
  } catch (const std::exception& e) {
    log(LogLevel::error, plugin_.name(), std::string("giving the memory cache back: ") + e.what());
  }
  if (live_blocks_ != 0)
    log(LogLevel::error, plugin_.name(),
        std::to_string(live_blocks_) + " buffers of device " + std::to_string(device_) +
            " outlived its allocator; their memory is left to the plugin's shutdown");
  for (H2_Event* event : spare_events_) plugin_.api().event_destroy(event);
  for (Block* block : spare_blocks_) delete block;
  // What is left belongs to segments still in use: their memory stays with the plugin, the
  // bookkeeping goes.
  for (auto& [ptr, segment] : segments_)
    for (Block* block = segment->head; block != nullptr;) delete std::exchange(block, block->next);
}

std::string CachingAllocator::label() const {
  return plugin_.name() + ":" + std::to_string(device_);
}

size_t CachingAllocator::round_request(size_t bytes) {
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

size_t CachingAllocator::segment_size_for(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMidRequest) return kLargeSegment;
  return (rounded + kLargeSegmentRound - 1) / kLargeSegmentRound * kLargeSegmentRound;
}

CachingAllocator::Pool& CachingAllocator::pool_of(const Segment& segment) {
  return segment.small ? small_pool_ : large_pool_;
}

CachingAllocator::Allocated CachingAllocator::allocate(size_t bytes, H2_Stream* stream) {
  if (bytes == 0) throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": cannot allocate 0 bytes");
  if (stream == nullptr)
    throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": a stream-ordered allocation needs a stream");
  if (bytes > SIZE_MAX - kLargeSegmentRound)
    throw Error(H2_STATUS_OUT_OF_MEMORY, label() + ": cannot allocate " + std::to_string(bytes) + " bytes");
  std::lock_guard lock(mutex_);
  poll_pending_frees();
  const size_t rounded = caching_ ? round_request(bytes) : bytes;
  Block* block = caching_ ? find_cached(rounded, stream) : nullptr;
  const bool hit = block != nullptr;
  if (hit) {
    ++stats_.cache_hits;
  } else {
    block = allocate_segment(rounded, stream);
  }
  if (caching_) block = split(block, rounded);
  block->state = Block::State::allocated;
  block->requested = bytes;
  ++live_blocks_;
  ++stats_.allocations;
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += bytes;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return {block->ptr, block, !hit && async_};
}

CachingAllocator::Block* CachingAllocator::new_block(Segment* segment, char* ptr, size_t size) {
  if (spare_blocks_.empty()) return new Block{segment, ptr, size};
  Block* block = spare_blocks_.back();
  spare_blocks_.pop_back();
  *block = Block{segment, ptr, size};
  return block;
}

void CachingAllocator::recycle(Block* block) {
  block->uses.clear();
  spare_blocks_.push_back(block);
}

CachingAllocator::Block* CachingAllocator::checked(void* ptr, void* token, const char* call) const {
  auto* block = static_cast<Block*>(token);
  if (block == nullptr || block->ptr != ptr || block->state != Block::State::allocated)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                label() + ": " + call + " of memory the caching allocator did not hand out (or already took back)");
  return block;
}

CachingAllocator::Block* CachingAllocator::find_cached(size_t rounded, H2_Stream* stream) {
  Pool& pool = rounded <= kSmallRequest ? small_pool_ : large_pool_;
  Segment key_segment{nullptr, 0, stream, false};
  Block key{&key_segment, nullptr, rounded};
  auto it = pool.lower_bound(&key);
  if (it != pool.end() && (*it)->segment->stream == stream) {
    Block* block = *it;
    pool.erase(it);
    return block;
  }
  // A whole segment whose stream is gone: nothing can still be using it, so any stream may claim it.
  key_segment.stream = nullptr;
  for (it = pool.lower_bound(&key); it != pool.end() && (*it)->segment->stream == nullptr; ++it) {
    Block* block = *it;
    if (block->prev != nullptr || block->next != nullptr) continue;
    pool.erase(it);
    block->segment->stream = stream;
    return block;
  }
  return nullptr;
}

void* CachingAllocator::plugin_allocate(size_t bytes, H2_Stream* stream, H2_Status& status) {
  void* ptr = nullptr;
  const H2_PluginApi& api = plugin_.api();
  status = async_ ? api.mem_alloc_async(device_, bytes, stream, &ptr) : api.mem_alloc(device_, bytes, &ptr);
  if (status != H2_STATUS_OK) return nullptr;
  ++stats_.plugin_allocations;
  return ptr;
}

void CachingAllocator::plugin_free(void* ptr, H2_Stream* stream, bool ordered) {
  const H2_PluginApi& api = plugin_.api();
  const bool async = ordered && async_ && stream != nullptr;
  const H2_Status status = async ? api.mem_free_async(device_, ptr, stream) : api.mem_free(device_, ptr);
  if (status != H2_STATUS_OK)  // the message only when it is needed: this is every free without caching
    plugin_.check(status,
                  std::string(async ? "mem_free_async" : "mem_free") + "(device " + std::to_string(device_) + ")");
  ++stats_.plugin_frees;
}

CachingAllocator::Block* CachingAllocator::allocate_segment(size_t rounded, H2_Stream* stream) {
  size_t size = caching_ ? segment_size_for(rounded) : rounded;
  H2_Status status = H2_STATUS_OK;
  void* ptr = plugin_allocate(size, stream, status);
  std::string plugin_message;
  if (ptr == nullptr && status == H2_STATUS_OUT_OF_MEMORY) {
    plugin_message = plugin_.api().last_error();
    if (caching_) {
      // What the cache holds may be what is missing: give it back and try once more, then try a
      // segment of just the request's size.
      ++stats_.cache_flushes;
      release_cached_segments();
      ptr = plugin_allocate(size, stream, status);
      if (ptr == nullptr && status == H2_STATUS_OUT_OF_MEMORY && size > rounded) {
        size = rounded;
        ptr = plugin_allocate(size, stream, status);
      }
      if (ptr == nullptr && status == H2_STATUS_OUT_OF_MEMORY) plugin_message = plugin_.api().last_error();
    }
  }
  if (ptr == nullptr) {
    if (status == H2_STATUS_OUT_OF_MEMORY) out_of_memory(rounded, plugin_message);
    plugin_.check(status, std::string(async_ ? "mem_alloc_async" : "mem_alloc") + "(device " + std::to_string(device_) +
                              ", " + std::to_string(size) + " bytes)");
  }
  auto segment = std::make_unique<Segment>(Segment{static_cast<char*>(ptr), size, stream, rounded <= kSmallRequest});
  Block* block = new_block(segment.get(), segment->ptr, size);
  segment->head = block;
  segments_.emplace(ptr, std::move(segment));
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return block;
}

CachingAllocator::Block* CachingAllocator::split(Block* block, size_t rounded) {
  const size_t rest = block->size - rounded;
  const bool worth_keeping = block->segment->small ? rest >= kMinBlock : rest > kSmallRequest;
  if (!worth_keeping) return block;
  Block* tail = new_block(block->segment, block->ptr + rounded, rest);
  tail->prev = block;
  tail->next = block->next;
  if (block->next != nullptr) block->next->prev = tail;
  block->next = tail;
  block->size = rounded;
  pool_of(*block->segment).insert(tail);
  return block;
}

void CachingAllocator::free(void* ptr, void* token) {
  std::lock_guard lock(mutex_);
  Block* block = checked(ptr, token, "free");
  --live_blocks_;
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  if (!caching_) {
    free_uncached(block);
    return;
  }
  if (block->uses.empty()) {
    release(block);
    return;
  }
  // Other streams may still be using the block: it returns to the cache when their work at this
  // point has completed. Every event is recorded before any is counted: if one cannot be, the block
  // stays allocated (lost, never reused early) and the free fails.
  std::vector<H2_Event*> events;
  try {
    for (H2_Stream* use : block->uses) {
      events.push_back(take_event());
      plugin_.check(plugin_.api().event_record(events.back(), use),
                    "event_record (freeing a block another stream used)");
    }
  } catch (...) {
    spare_events_.insert(spare_events_.end(), events.begin(), events.end());
    ++live_blocks_;
    stats_.allocated_bytes += block->size;
    stats_.requested_bytes += block->requested;
    throw;
  }
  block->state = Block::State::pending_events;
  block->pending_events = static_cast<int>(events.size());
  for (H2_Event* event : events) pending_frees_.push_back({event, block});
  block->uses.clear();
}

void CachingAllocator::free_uncached(Block* block) {
  Segment* segment = block->segment;
  if (segment->stream != nullptr && async_) {
    // mem_free_async orders the free on the allocating stream only: order the other users first.
    for (H2_Stream* use : block->uses) {
      H2_Event* event = take_event();
      spare_events_.push_back(event);  // a later record does not affect the wait enqueued below
      plugin_.check(plugin_.api().event_record(event, use), "event_record (freeing a block another stream used)");
      plugin_.check(plugin_.api().stream_wait_event(segment->stream, event), "stream_wait_event");
    }
  }
  // Without mem_free_async, mem_free itself waits for every stream's queued work.
  plugin_free(segment->ptr, segment->stream, /*ordered=*/true);
  stats_.reserved_bytes -= segment->size;
  recycle(block);
  segments_.erase(segment->ptr);
}

void CachingAllocator::release(Block* block) {
  Pool& pool = pool_of(*block->segment);
  block->state = Block::State::cached;
  if (Block* prev = block->prev; prev != nullptr && prev->state == Block::State::cached) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    recycle(block);
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && next->state == Block::State::cached) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    recycle(next);
  }
  pool.insert(block);
}

void CachingAllocator::record_stream(void* ptr, void* token, H2_Stream* stream) {
  std::lock_guard lock(mutex_);
  Block* block = checked(ptr, token, "record_stream");
  if (stream == block->segment->stream) return;
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) block->uses.push_back(stream);
}

void CachingAllocator::stream_retired(H2_Stream* stream) {
  std::lock_guard lock(mutex_);
  for (auto& [ptr, segment] : segments_) {
    for (Block* block = segment->head; block != nullptr; block = block->next) std::erase(block->uses, stream);
    if (segment->stream != stream) continue;
    // The pools are ordered by stream: take the segment's cached blocks out while its key changes.
    std::vector<Block*> cached;
    for (Block* block = segment->head; block != nullptr; block = block->next)
      if (block->state == Block::State::cached) cached.push_back(block);
    Pool& pool = pool_of(*segment);
    for (Block* block : cached) pool.erase(block);
    segment->stream = nullptr;
    for (Block* block : cached) pool.insert(block);
  }
}

void CachingAllocator::poll_pending_frees() {
  for (auto it = pending_frees_.begin(); it != pending_frees_.end();) {
    const H2_Status status = plugin_.api().event_query(it->event);
    if (status == H2_STATUS_NOT_READY) {
      ++it;
      continue;
    }
    plugin_.check(status, "event_query (a block another stream used)");
    spare_events_.push_back(it->event);
    if (--it->block->pending_events == 0) release(it->block);
    it = pending_frees_.erase(it);
  }
}

void CachingAllocator::wait_pending_frees() {
  for (const PendingFree& pending : pending_frees_)
    plugin_.check(plugin_.api().event_synchronize(pending.event), "event_synchronize (a block another stream used)");
  poll_pending_frees();
}

void CachingAllocator::release_cached_segments() {
  wait_pending_frees();
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment& segment = *it->second;
    Block* head = segment.head;
    if (head->state != Block::State::cached || head->next != nullptr) {
      ++it;
      continue;
    }
    // The blocking mem_free, not mem_free_async: a retry after an out-of-memory must find the memory
    // free at once (cpu-reference releases an ordered free only when its stream reaches it), and
    // emptying the cache is rare. Freed before it leaves the pool, so a failure leaves it cached.
    plugin_free(segment.ptr, segment.stream, /*ordered=*/false);
    pool_of(segment).erase(head);
    stats_.reserved_bytes -= segment.size;
    recycle(head);
    it = segments_.erase(it);
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_segments();
}

H2_Event* CachingAllocator::take_event() {
  if (!spare_events_.empty()) {
    H2_Event* event = spare_events_.back();
    spare_events_.pop_back();
    return event;
  }
  H2_Event* event = nullptr;
  plugin_.check(plugin_.api().event_create(device_, H2_EVENT_DISABLE_TIMING, &event),
                "event_create(device " + std::to_string(device_) + ")");
  return event;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::out_of_memory(size_t bytes, const std::string& plugin_message) const {
  std::string text = label() + ": out of memory: " + byte_text(bytes) + " for a buffer do not fit; buffers hold " +
                     byte_text(stats_.allocated_bytes) +
                     (caching_ ? ", the cache holds " + byte_text(stats_.reserved_bytes - stats_.allocated_bytes) +
                                     " after giving back what it could"
                               : "");
  if (const auto mem_info = plugin_.api().mem_info; mem_info != nullptr) {
    uint64_t free_bytes = 0, total_bytes = 0;
    if (mem_info(device_, &free_bytes, &total_bytes) == H2_STATUS_OK)
      text += ", and the device has " + byte_text(free_bytes) + " free of " + byte_text(total_bytes);
  }
  if (!plugin_message.empty()) text += " (" + plugin_.name() + ": " + plugin_message + ")";
  throw Error(H2_STATUS_OUT_OF_MEMORY, text);
}

}  // namespace h2::detail
