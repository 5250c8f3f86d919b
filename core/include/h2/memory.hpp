// The core's device memory, as framework code sees it: statistics of each device's caching allocator
// and the calls that manage its cache (as torch.cuda.memory_stats and empty_cache).
//
// Memory for work on a stream (Tensor::empty(stream, ...), Device::allocate(bytes, stream)) comes
// from a caching allocator per device, in the manner of PyTorch's CUDA caching allocator: blocks are
// carved from larger segments the plugin allocated, and a freed block goes back to the cache at once
// without waiting for the device. It is reused at once for work on the stream it was made for (that
// stream's order already puts the new work after the old), and by another stream only when the
// stream that made it has been destroyed; a block a second stream used (record_stream) is reused
// only once an event recorded on that stream at the free has completed. H2_ALLOCATOR=plugin turns
// the cache off: every tensor is then its own plugin allocation (stream-ordered where the plugin has
// mem_alloc_async), which makes a tool such as a memory checker see each one.
#pragma once

#include <cstdint>

#include "h2/device.hpp"

namespace h2 {

struct MemoryStats {
  bool caching = true;           // false under H2_ALLOCATOR=plugin
  uint64_t allocated_bytes = 0;  // held by live buffers (block sizes, rounded up to 512 bytes)
  uint64_t requested_bytes = 0;  // what those buffers asked for
  uint64_t reserved_bytes = 0;   // obtained from the plugin: allocated plus cached
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t allocations = 0;         // buffers handed out
  uint64_t cache_hits = 0;          // of those, served without calling the plugin
  uint64_t plugin_allocations = 0;  // mem_alloc or mem_alloc_async calls
  uint64_t plugin_frees = 0;        // mem_free or mem_free_async calls
  uint64_t cache_flushes = 0;       // times an allocation emptied the cache to fit (out of memory)

  uint64_t cached_bytes() const { return reserved_bytes - allocated_bytes; }
};

// The statistics of `device`'s allocator (all zero before its first stream-ordered allocation).
MemoryStats memory_stats(const Device& device);
// Gives every cached block that no buffer holds back to the plugin (waiting for the events of blocks
// other streams used). Buffers still alive are untouched.
void empty_cache(const Device& device);
// Sets the peaks to the current values, so the next peak measures a new phase (a training step).
void reset_peak_memory_stats(const Device& device);

}  // namespace h2
