// One emulated device's memory (its HBM): a file in memory mapped twice. Callers get addresses in a
// mapping with no access rights, so host code that dereferences device memory faults at once, as it
// would on a real Ascend device; the emulator's copies and kernels use the second, writable mapping
// (device_view). Allocation is first fit with coalescing, rounded as aclrtMalloc documents (sizes to
// 32 bytes plus 32 of padding), and blocks are aligned to 512 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace ascend_emulator {

class DeviceMemory {
 public:
  DeviceMemory(int physical_device, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* allocate(size_t bytes);  // nullptr when it does not fit
  void release(void* ptr);       // throws Error for a pointer that is not a live allocation
  size_t free_bytes() const;
  size_t total_bytes() const { return bytes_; }

  // Whether [ptr, ptr + bytes) lies inside one live allocation; its writable view, or nullptr.
  void* view(const void* ptr, size_t bytes) const;
  // For sharing with another process: the memory file and where `ptr` lies in it.
  int file() const { return file_; }
  size_t file_offset(const void* ptr) const {
    return static_cast<size_t>(static_cast<const char*>(ptr) - device_base_);
  }

 private:
  int device_;
  size_t bytes_;
  int file_ = -1;
  char* device_base_ = nullptr;  // what callers see: PROT_NONE
  char* host_base_ = nullptr;    // what the emulator reads and writes
  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> size, coalesced
  struct Block {
    size_t size;       // as carved, rounded
    size_t requested;  // what the caller asked for: all it may use
  };
  std::map<size_t, Block> live_;  // by offset
  size_t used_ = 0;
};

}  // namespace ascend_emulator
