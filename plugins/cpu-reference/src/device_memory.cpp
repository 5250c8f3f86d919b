#include "device_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common.hpp"
#include "dmabuf_export.hpp"
#include "strict_fault_handler.hpp"

namespace h2::cpu_reference {

namespace {

// Frees of at least this size give their pages back to the operating system, so a long run that
// allocates and frees large buffers does not keep the peak resident.
constexpr size_t kReturnPagesThreshold = 1 << 20;

size_t round_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

char* map_region(size_t bytes, int protection, int device, int fd = -1) {
  const int flags = (fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED) | MAP_NORESERVE;
  void* p = mmap(nullptr, bytes, protection, flags, fd, 0);
  if (p == MAP_FAILED)
    fail(H2_STATUS_OUT_OF_MEMORY, "device " + std::to_string(device) + ": cannot reserve " + format_bytes(bytes) +
                                      " of address space: " + std::strerror(errno));
  return static_cast<char*>(p);
}

// A sparse memfd of `bytes` for the arena, or -1 with the reason in `why` (seccomp, old kernels).
int create_arena_file(size_t bytes, int device, std::string& why) {
  const std::string name = "h2-cpu-reference-dev" + std::to_string(device);
  // Sealed against shrinking: udmabuf takes only such a memfd (its pages cannot vanish under a NIC).
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    why = std::string("memfd_create failed: ") + std::strerror(errno);
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    why = std::string("ftruncate of the arena's memfd failed: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    why = std::string("sealing the arena's memfd failed: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
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

DeviceMemory::DeviceMemory(int device, uint64_t capacity, bool strict)
    : device_(device), capacity_(capacity), strict_(strict), imports_(device, strict) {
  mapped_bytes_ = round_up(static_cast<size_t>(capacity), static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  memfd_ = create_arena_file(mapped_bytes_, device, unshareable_why_);
  struct stat info {};
  if (memfd_ >= 0 && fstat(memfd_, &info) == 0) {
    memfd_inode_ = static_cast<uint64_t>(info.st_ino);
    memfd_filesystem_ = static_cast<uint64_t>(info.st_dev);
  }
  try {
    shadow_view_ = map_region(mapped_bytes_, PROT_READ | PROT_WRITE, device, memfd_);
  } catch (...) {
    if (memfd_ >= 0) close(memfd_);
    throw;
  }
  if (strict) {
    try {
      device_view_ = map_region(mapped_bytes_, PROT_NONE, device);
      register_device_range(device_view_, mapped_bytes_, device);
    } catch (...) {
      munmap(shadow_view_, mapped_bytes_);
      if (memfd_ >= 0) close(memfd_);
      throw;
    }
  } else {
    device_view_ = shadow_view_;
  }
  const size_t usable = static_cast<size_t>(capacity) / kAlignment * kAlignment;
  if (usable > 0) free_.emplace(0, usable);
}

DeviceMemory::~DeviceMemory() {
  if (device_view_ != shadow_view_) {
    unregister_device_range(device_view_);
    munmap(device_view_, mapped_bytes_);
  }
  munmap(shadow_view_, mapped_bytes_);
  if (memfd_ >= 0) close(memfd_);
}

void* DeviceMemory::allocate(size_t bytes) {
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
  const size_t need = round_up(bytes, kAlignment);
  std::lock_guard lock(mutex_);
  size_t largest = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= need) {
      size_t offset = it->first;
      size_t remaining = it->second - need;
      free_.erase(it);
      if (remaining > 0) free_.emplace(offset + need, remaining);
      live_.emplace(offset, Allocation{bytes, need});
      allocated_ += need;
      return device_view_ + offset;
    }
    largest = std::max(largest, it->second);
  }
  const uint64_t free_total = capacity_ - allocated_;
  std::string message = "device " + std::to_string(device_) + " out of memory: requested " + format_bytes(bytes) +
                        ", " + format_bytes(free_total) + " free of " + format_bytes(capacity_);
  if (free_total >= need) message += " (fragmented: the largest free block is " + format_bytes(largest) + ")";
  fail(H2_STATUS_OUT_OF_MEMORY, message);
}

void DeviceMemory::retire(void* ptr) {
  std::lock_guard lock(mutex_);
  auto it = in_arena(ptr) ? live_.find(offset_of(ptr)) : live_.end();
  if (it == live_.end() || it->second.retired)
    fail(H2_STATUS_INVALID_ARGUMENT,
         "pointer is not the start of a live allocation on device " + std::to_string(device_) + " (already freed?)");
  it->second.retired = true;
}

void DeviceMemory::release(void* ptr, bool retired_ok) {
  if (imports_.holds(ptr))
    fail(H2_STATUS_INVALID_ARGUMENT, "pointer is memory imported from another process: mem_close closes it");
  std::lock_guard lock(mutex_);
  if (!in_arena(ptr))
    fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not device memory of device " + std::to_string(device_));
  size_t offset = offset_of(ptr);
  auto it = live_.find(offset);
  if (it == live_.end() || (it->second.retired && !retired_ok))
    fail(H2_STATUS_INVALID_ARGUMENT,
         "pointer is not the start of a live allocation on device " + std::to_string(device_) + " (already freed?)");
  size_t size = it->second.reserved;
  live_.erase(it);
  allocated_ -= size;

  if (size >= kReturnPagesThreshold) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t begin = round_up(offset, page);
    size_t end = (offset + size) / page * page;
    // A shared mapping keeps its pages in the file: punch them out of the memfd instead.
    if (end > begin && memfd_ >= 0)
      fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(begin),
                static_cast<off_t>(end - begin));
    else if (end > begin)
      madvise(shadow_view_ + begin, end - begin, MADV_DONTNEED);
  }

  // Insert into the free list and merge with neighbours.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(offset, size);
}

bool DeviceMemory::in_arena(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  return p >= device_view_ && p < device_view_ + capacity_;
}

bool DeviceMemory::contains(const void* ptr) const {
  return in_arena(ptr) || imports_.holds(ptr);
}

DeviceMemory::LiveMap::const_iterator DeviceMemory::allocation_at(size_t offset) const {
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return live_.end();
  --it;
  return offset < it->first + it->second.requested && !it->second.retired ? it : live_.end();
}

SharedRange DeviceMemory::share(const void* ptr, uint64_t& offset_within) const {
  std::lock_guard lock(mutex_);
  if (!in_arena(ptr))
    fail(H2_STATUS_INVALID_ARGUMENT,
         "pointer is not device memory of device " + std::to_string(device_) +
             (imports_.holds(ptr) ? " (it is an import: export it where it was allocated)" : ""));
  auto it = allocation_at(offset_of(ptr));
  if (it == live_.end()) fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not inside a live allocation");
  if (memfd_ < 0)
    fail(H2_STATUS_UNSUPPORTED, "device " + std::to_string(device_) +
                                    "'s memory cannot be shared with other "
                                    "processes: " +
                                    unshareable_why_);
  offset_within = offset_of(ptr);
  return {getpid(), memfd_, memfd_inode_, memfd_filesystem_, 0, capacity_};
}

int DeviceMemory::export_dmabuf(const void* ptr, size_t bytes, uint64_t& offset_within) const {
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot export 0 bytes as a dma-buf");
  size_t first = 0;
  {
    std::lock_guard lock(mutex_);
    if (!in_arena(ptr))
      fail(H2_STATUS_INVALID_ARGUMENT,
           "pointer is not device memory of device " + std::to_string(device_) +
               (imports_.holds(ptr) ? " (it is an import: export it where it was allocated)" : ""));
    first = offset_of(ptr);
    auto it = allocation_at(first);
    if (it == live_.end()) fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not inside a live allocation");
    const size_t end = it->first + it->second.requested;
    if (bytes > end - first)
      fail(H2_STATUS_INVALID_ARGUMENT,
           "the range runs " + std::to_string(bytes - (end - first)) + " bytes past the end of its allocation");
  }
  if (memfd_ < 0)
    fail(H2_STATUS_UNSUPPORTED,
         "device " + std::to_string(device_) + "'s memory is not a memfd, so not a dma-buf: " + unshareable_why_);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t begin = first / page * page;
  const size_t length = round_up(first + bytes, page) - begin;
  const int fd = create_udmabuf(memfd_, begin, length);
  offset_within = first - begin;
  return fd;
}

bool DeviceMemory::exports_dmabuf() const {
  return memfd_ >= 0 && udmabuf_available();
}

size_t DeviceMemory::offset_of(const void* ptr) const {
  return static_cast<size_t>(static_cast<const char*>(ptr) - device_view_);
}

void* DeviceMemory::resolve(const void* ptr, size_t bytes, const char* role) const {
  std::lock_guard lock(mutex_);
  auto where = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "%p (+%zu bytes)", ptr, bytes);
    return std::string(text);
  };
  if (!in_arena(ptr)) {
    if (void* imported = imports_.resolve(ptr, bytes, role)) return imported;
    fail(H2_STATUS_INVALID_ARGUMENT,
         std::string(role) + " " + where() + " is not device memory of device " + std::to_string(device_));
  }
  size_t offset = offset_of(ptr);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin())
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " " + where() + " is not inside a live allocation");
  --it;
  const size_t end = it->first + it->second.requested;
  if (it->second.retired && offset < end)
    fail(H2_STATUS_INVALID_ARGUMENT,
         std::string(role) + " " + where() + " is memory already freed with mem_free_async (a use after free)");
  if (offset >= end && bytes > 0)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " " + where() + " is not inside a live allocation");
  if (offset + bytes > end)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " " + where() + " runs " +
                                         std::to_string(offset + bytes - end) +
                                         " bytes past the end of its allocation");
  return shadow_view_ + offset;
}

uint64_t DeviceMemory::free_bytes() const {
  std::lock_guard lock(mutex_);
  return capacity_ - allocated_;
}

}  // namespace h2::cpu_reference
