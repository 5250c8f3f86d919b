// One cpu-reference device's memory: a fixed-capacity arena with a first-fit allocator.
//
// The arena reserves `capacity` bytes of address space twice over in strict mode: a "device view"
// whose addresses are handed out as device pointers and which is mapped PROT_NONE, so host code
// that dereferences a device pointer faults at once; and a "shadow view" through which the plugin's
// own calls read and write. Outside strict mode the two views are the same mapping, so device
// pointers are ordinary host addresses. Either way the plugin translates every device pointer it is
// given through `resolve`, which also checks that the range lies inside one live allocation.
//
// The shadow view maps a memfd, so another process can map the arena too (memory_sharing.hpp);
// where memfd_create is not allowed it is anonymous memory and exporting says why not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "memory_sharing.hpp"

namespace h2::cpu_reference {

class DeviceMemory {
 public:
  static constexpr size_t kAlignment = 256;

  DeviceMemory(int device, uint64_t capacity, bool strict);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Returns a device pointer; throws PluginError(OUT_OF_MEMORY) naming the device and what is free.
  void* allocate(size_t bytes);
  // Throws PluginError(INVALID_ARGUMENT) unless `ptr` is the start of a live allocation (one that
  // retire() marked counts only when `retired_ok`: mem_free_async's own release).
  void release(void* ptr, bool retired_ok = false);
  // mem_free_async's first half: the allocation stays reserved until its stream reaches the free,
  // but from now on resolve() refuses it, so work enqueued after the free on it is caught.
  void retire(void* ptr);

  // Translates [ptr, ptr + bytes) to the shadow view. Throws PluginError(INVALID_ARGUMENT), naming
  // `role` ("destination", "source"), unless the range lies inside one live allocation or one
  // allocation imported from another process.
  void* resolve(const void* ptr, size_t bytes, const char* role) const;

  // True when `ptr` lies inside this device's address range (allocated or not) or an import.
  bool contains(const void* ptr) const;

  // The whole arena, for another process (mem_export), and `ptr`'s offset in it: a peer that keeps
  // its import then maps this device once, whatever allocations come and go, instead of once per
  // allocation (each import is an mmap, and closing one waits for every stream). Throws
  // PluginError: INVALID_ARGUMENT outside a live allocation, UNSUPPORTED when the arena is not
  // shareable.
  SharedRange share(const void* ptr, uint64_t& offset_within) const;
  ImportedRanges& imports() { return imports_; }
  // [ptr, ptr + bytes) as a dma-buf (mem_export_dmabuf): the whole pages that hold it, and `ptr`'s
  // offset within them. Throws PluginError: INVALID_ARGUMENT unless the range is inside one live
  // allocation, UNSUPPORTED when the arena is not a memfd or udmabuf refuses (dmabuf_export.hpp).
  int export_dmabuf(const void* ptr, size_t bytes, uint64_t& offset_within) const;
  // Whether export_dmabuf can work here at all (H2_NIC_DIRECT_DMABUF).
  bool exports_dmabuf() const;

  uint64_t capacity() const { return capacity_; }
  uint64_t free_bytes() const;
  bool strict() const { return strict_; }

 private:
  struct Allocation {
    size_t requested;      // what the caller asked for: accesses are checked against this
    size_t reserved;       // rounded up to kAlignment: what the allocator holds
    bool retired = false;  // freed by mem_free_async, waiting for its stream to reach the free
  };
  using LiveMap = std::map<size_t, Allocation>;

  size_t offset_of(const void* ptr) const;
  bool in_arena(const void* ptr) const;
  // The live allocation whose requested bytes hold `offset`, or live_.end(). Needs mutex_.
  LiveMap::const_iterator allocation_at(size_t offset) const;

  int device_;
  uint64_t capacity_;
  bool strict_;
  size_t mapped_bytes_ = 0;
  char* device_view_ = nullptr;
  char* shadow_view_ = nullptr;
  int memfd_ = -1;            // backs the shadow view; -1 when it is anonymous memory
  uint64_t memfd_inode_ = 0;  // names it in handles, so an importer can tell it from a reused number
  uint64_t memfd_filesystem_ = 0;
  std::string unshareable_why_;  // why memfd_ is -1
  ImportedRanges imports_;

  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> size, coalesced
  LiveMap live_;                   // offset -> allocation
  uint64_t allocated_ = 0;
};

// Formats a byte count for messages: "1.50 GiB".
std::string format_bytes(uint64_t bytes);

}  // namespace h2::cpu_reference
