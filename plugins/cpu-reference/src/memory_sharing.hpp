// Device memory shared between processes of one node (mem_export / mem_import, ABI 1.3).
//
// Each device's arena lives in a memfd (DeviceMemory). A handle names a range of it: the exporting
// process's id, the memfd's descriptor number there and its inode, and the range's offset and size
// (DeviceMemory exports the whole arena). The importing process opens the memfd through
// /proc/<pid>/fd/<fd> (the same ptrace-based permission as process_vm_readv) and maps the range. In strict mode the
// import gets a PROT_NONE device view as well, like the arena, so host dereferences still fault.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "h2/plugin_abi.h"

namespace h2::cpu_reference {

// What a cpu-reference H2_MemHandle holds.
struct SharedRange {
  pid_t pid = 0;
  int fd = -1;
  uint64_t inode = 0;
  uint64_t filesystem = 0;  // st_dev: with the inode, names the memfd even after a pid is reused
  uint64_t offset = 0;      // of the range in the memfd
  uint64_t bytes = 0;
};

H2_MemHandle encode_handle(const SharedRange& range);

// A range of another process's memfd mapped read-write into this one (the shadow view of an
// import; the collective library's view of a peer's arena). munmap(base, mapped) releases it.
struct MappedRange {
  char* base = nullptr;  // the mapping, from the page that holds the range's first byte
  size_t mapped = 0;     // bytes mapped
  size_t lead = 0;       // where the range starts in the mapping
};
// Throws PluginError: UNSUPPORTED naming the reason when the memfd cannot be opened from this
// process (it ended, is another user's or another node's, or is no longer the arena the range
// names); OUT_OF_MEMORY when the mapping fails.
MappedRange map_shared_range(const SharedRange& range);
// Throws PluginError(INVALID_ARGUMENT) for bytes that are not a cpu-reference handle.
SharedRange decode_handle(const H2_MemHandle& handle);

// The ranges one device has opened from other processes.
class ImportedRanges {
 public:
  ImportedRanges(int device, bool strict) : device_(device), strict_(strict) {}
  ~ImportedRanges();
  ImportedRanges(const ImportedRanges&) = delete;
  ImportedRanges& operator=(const ImportedRanges&) = delete;

  // Maps `range`; returns the device pointer to its first byte. Throws PluginError(UNSUPPORTED)
  // naming the reason when the memory cannot be opened from this process.
  void* open(const SharedRange& range);
  // Throws PluginError(INVALID_ARGUMENT) unless `ptr` came from open() and is still open.
  void close(void* ptr);
  // [ptr, ptr + bytes) in the shadow view when it lies inside one open import; nullptr when `ptr` is
  // in none. Throws PluginError(INVALID_ARGUMENT) when the range starts in one and runs past its end.
  void* resolve(const void* ptr, size_t bytes, const char* role) const;
  bool holds(const void* ptr) const;

 private:
  struct Import {
    char* device_view;  // what the caller gets (== shadow_view + lead outside strict mode)
    char* shadow_view;  // the mapping of the memfd's pages
    size_t mapped;      // bytes mapped from the page below the range's start
    size_t lead;        // the range's start within the mapping
    size_t bytes;
  };
  // The import holding `ptr`, or end().
  std::map<const char*, Import>::const_iterator find(const void* ptr) const;

  int device_;
  bool strict_;
  mutable std::mutex mutex_;
  std::map<const char*, Import> imports_;  // by the device pointer open() returned
};

}  // namespace h2::cpu_reference
