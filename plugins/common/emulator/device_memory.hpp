// One emulated device's memory: a file in memory mapped twice. Callers get addresses in a mapping with
// no access rights, so host code that dereferences device memory faults at once, as it would on a real
// accelerator; the emulator's copies and kernels use the second, writable mapping (view). Allocation
// is first fit with coalescing, rounded as the vendor documents. The file can be mapped by another
// process (ForeignMapping), which is how the emulators share memory between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "emulator_error.hpp"

namespace h2::emulator {

// How the vendor's malloc rounds: sizes up to `granule` plus `padding` bytes, blocks aligned to
// `alignment` (a multiple of granule).
struct AllocationRounding {
  size_t granule;
  size_t padding;
  size_t alignment;
};

class DeviceMemory {
 public:
  // `name` names the memory file (e.g. "mlu-emulator-dram-0").
  DeviceMemory(const std::string& name, int physical_device, size_t bytes, AllocationRounding rounding,
               const VendorCodes& codes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* allocate(size_t bytes);  // nullptr when it does not fit
  void release(void* ptr);       // throws Error for a pointer that is not a live allocation
  size_t free_bytes() const;
  size_t total_bytes() const { return bytes_; }

  // Whether [ptr, ptr + bytes) lies inside one live allocation; its writable view, or nullptr.
  void* view(const void* ptr, size_t bytes) const;
  // The live allocation holding `ptr`: its start and the size asked for, or {nullptr, 0}.
  std::pair<void*, size_t> allocation_of(const void* ptr) const;
  // For sharing with another process: the memory file and where `ptr` lies in it.
  int file() const { return file_; }
  size_t file_offset(const void* ptr) const {
    return static_cast<size_t>(static_cast<const char*>(ptr) - device_base_);
  }

 private:
  size_t rounded(size_t bytes) const;

  int device_;
  size_t bytes_;
  AllocationRounding rounding_;
  const VendorCodes& codes_;
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

// Another process's device memory mapped into this one (IPC): `size` bytes at `offset` of memory file
// `file` of process `pid` (to the file's end when `size` is 0), mapped twice as DeviceMemory is.
// Throws Error(no_permission) when the process cannot be reached.
class ForeignMapping {
 public:
  ForeignMapping(unsigned long long pid, unsigned long long file, size_t offset, size_t size, const VendorCodes& codes);
  ~ForeignMapping();
  ForeignMapping(const ForeignMapping&) = delete;
  ForeignMapping& operator=(const ForeignMapping&) = delete;

  void* device_pointer() const { return device_map_ + skip_; }  // what the importer is given
  // The writable view of [ptr, ptr + bytes) when it lies in this mapping, else nullptr.
  void* view(const void* ptr, size_t bytes) const;

 private:
  char* device_map_ = nullptr;  // PROT_NONE
  char* host_map_ = nullptr;
  size_t length_ = 0;
  size_t skip_ = 0;  // the offset within the mapping (mappings start on a page)
  size_t size_ = 0;
};

}  // namespace h2::emulator
