// One device's stream-ordered caching allocator (see h2/memory.hpp for what it promises).
//
// Its structure follows PyTorch's CUDACachingAllocator: requests are rounded to 512 bytes; those up
// to 1 MiB come from 2 MiB "small" segments, larger ones from 20 MiB segments (up to 10 MiB) or from
// segments of their own size rounded to 2 MiB; a cached block larger than the request is split when
// the rest is worth keeping, and a freed block merges with free neighbours of its segment. Every
// segment belongs to the stream it was allocated for, so a block is only ever handed out again for
// that stream, where stream order makes reuse safe without waiting; a segment whose stream has been
// destroyed (which waits for the stream's work) belongs to none and may be claimed, whole, by any.
// Frees of blocks another stream used wait for an event recorded on that stream at the free,
// polled on later calls, never waited for on the host except to empty the cache.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "h2/memory.hpp"
#include "h2/plugin_abi.h"

namespace h2::detail {

class PluginHandle;

class CachingAllocator {
 public:
  static constexpr size_t kMinBlock = 512;               // every block is a multiple of this
  static constexpr size_t kSmallRequest = 1 << 20;       // requests up to this use the small pool
  static constexpr size_t kSmallSegment = 2 << 20;       // segment size of the small pool
  static constexpr size_t kLargeSegment = 20 << 20;      // segment size for requests under kMidRequest
  static constexpr size_t kMidRequest = 10 << 20;        // larger requests get a segment of their own
  static constexpr size_t kLargeSegmentRound = 2 << 20;  // ... rounded up to this

  // `caching` false: every allocation is a plugin allocation of its own (H2_ALLOCATOR=plugin).
  CachingAllocator(const PluginHandle& plugin, int device, bool caching);
  // Gives every cached segment back; buffers still alive at this point are a bug and are logged.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The memory and the allocator's token for it, which free and record_stream take back (it saves
  // them looking the pointer up).
  struct Allocated {
    void* ptr;
    void* token;
    bool enqueued;  // mem_alloc_async was called on the stream: it has new work to order after
  };
  // At least `bytes` (> 0) for work ordered on `stream`. Throws h2::Error(OUT_OF_MEMORY) naming the
  // device, the request, what is allocated and cached and what the device has free, after giving
  // the cache back to the plugin and trying once more.
  Allocated allocate(size_t bytes, H2_Stream* stream);
  // Takes back what allocate() returned. Never waits for the device, except without caching on a
  // plugin without mem_free_async (or for memory whose stream is gone), where it is mem_free.
  void free(void* ptr, void* token);
  // The memory is also used by work on `stream`: its free waits for that work (torch's
  // Tensor.record_stream). A no-op for the stream the memory was made for.
  void record_stream(void* ptr, void* token, H2_Stream* stream);
  // `stream` has no pending work and will be destroyed: its segments now belong to no stream.
  void stream_retired(H2_Stream* stream);

  void empty_cache();
  MemoryStats stats() const;
  void reset_peak();

 private:
  struct Segment;
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;
  struct PendingFree {
    H2_Event* event;
    Block* block;
  };

  static size_t round_request(size_t bytes);
  static size_t segment_size_for(size_t rounded);
  Pool& pool_of(const Segment& segment);

  Block* find_cached(size_t rounded, H2_Stream* stream);
  Block* allocate_segment(size_t rounded, H2_Stream* stream);
  void* plugin_allocate(size_t bytes, H2_Stream* stream, H2_Status& status);
  // mem_free_async on `stream` where the plugin has it and `ordered`, else the blocking mem_free.
  void plugin_free(void* ptr, H2_Stream* stream, bool ordered);
  Block* split(Block* block, size_t rounded);
  // Blocks are recycled, not deleted: a split and a merge per cached allocation would otherwise
  // cost two trips to the heap.
  Block* new_block(Segment* segment, char* ptr, size_t size);
  void recycle(Block* block);
  Block* checked(void* ptr, void* token, const char* call) const;
  void release(Block* block);  // back to its pool, merged with free neighbours
  void free_uncached(Block* block);
  void poll_pending_frees();
  void wait_pending_frees();
  void release_cached_segments();
  H2_Event* take_event();
  std::string label() const;  // "cpu-reference:0"
  [[noreturn]] void out_of_memory(size_t bytes, const std::string& plugin_message) const;

  const PluginHandle& plugin_;
  const int device_;
  const bool caching_;
  const bool async_;  // the plugin has mem_alloc_async and mem_free_async

  mutable std::mutex mutex_;
  Pool small_pool_, large_pool_;
  size_t live_blocks_ = 0;
  std::vector<Block*> spare_blocks_;
  std::unordered_map<void*, std::unique_ptr<Segment>> segments_;
  std::deque<PendingFree> pending_frees_;
  std::vector<H2_Event*> spare_events_;
  MemoryStats stats_;
};

}  // namespace h2::detail
