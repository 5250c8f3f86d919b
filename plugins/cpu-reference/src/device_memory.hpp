// One cpu-reference device's memory: a fixed-capacity arena with a first-fit allocator.
//
// The arena reserves `capacity` bytes of address space twice over in strict mode: a "device view"
// whose addresses are handed out as device pointers and which is mapped PROT_NONE, so host code
// that dereferences a device pointer faults at once; and a "shadow view" through which the plugin's
// own calls read and write. Outside strict mode the two views are the same mapping, so device
// pointers are ordinary host addresses. Either way the plugin translates every device pointer it is
// given through `resolve`, which also checks that the range lies inside one live allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

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
  // Throws PluginError(INVALID_ARGUMENT) unless `ptr` is the start of a live allocation.
  void release(void* ptr);

  // Translates [ptr, ptr + bytes) to the shadow view. Throws PluginError(INVALID_ARGUMENT), naming
  // `role` ("destination", "source"), unless the range lies inside one live allocation.
  void* resolve(const void* ptr, size_t bytes, const char* role) const;

  // True when `ptr` lies inside this device's address range (allocated or not).
  bool contains(const void* ptr) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t free_bytes() const;
  bool strict() const { return strict_; }

 private:
  size_t offset_of(const void* ptr) const;

  int device_;
  uint64_t capacity_;
  bool strict_;
  size_t mapped_bytes_ = 0;
  char* device_view_ = nullptr;
  char* shadow_view_ = nullptr;

  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> size, coalesced
  struct Allocation {
    size_t requested;  // what the caller asked for: accesses are checked against this
    size_t reserved;   // rounded up to kAlignment: what the allocator holds
  };
  std::map<size_t, Allocation> live_;  // offset -> allocation
  uint64_t allocated_ = 0;
};

// Formats a byte count for messages: "1.50 GiB".
std::string format_bytes(uint64_t bytes);

}  // namespace h2::cpu_reference
