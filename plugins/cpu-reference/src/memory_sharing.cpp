#include "memory_sharing.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common.hpp"
#include "strict_fault_handler.hpp"

namespace h2::cpu_reference {

namespace {

constexpr char kMagic[8] = {'h', '2', 'c', 'p', 'u', 'r', 'e', 'f'};
constexpr uint32_t kFormat = 2;

// The handle's byte layout: magic, format, then the range's fields.
struct Wire {
  char magic[8];
  uint32_t format;
  int32_t pid;
  int32_t fd;
  uint32_t reserved;
  uint64_t inode;
  uint64_t filesystem;
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(Wire) <= H2_MEM_HANDLE_BYTES);

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

H2_MemHandle encode_handle(const SharedRange& range) {
  Wire wire{};
  std::memcpy(wire.magic, kMagic, sizeof kMagic);
  wire.format = kFormat;
  wire.pid = range.pid;
  wire.fd = range.fd;
  wire.inode = range.inode;
  wire.filesystem = range.filesystem;
  wire.offset = range.offset;
  wire.bytes = range.bytes;
  H2_MemHandle handle{};
  std::memcpy(handle.bytes, &wire, sizeof wire);
  return handle;
}

SharedRange decode_handle(const H2_MemHandle& handle) {
  Wire wire;
  std::memcpy(&wire, handle.bytes, sizeof wire);
  if (std::memcmp(wire.magic, kMagic, sizeof kMagic) != 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "the handle was not made by cpu-reference's mem_export");
  if (wire.format != kFormat)
    fail(H2_STATUS_INVALID_ARGUMENT, "the handle has format " + std::to_string(wire.format) +
                                         "; this cpu-reference reads format " + std::to_string(kFormat));
  if (wire.pid <= 0 || wire.fd < 0 || wire.bytes == 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "the handle is damaged (pid " + std::to_string(wire.pid) + ", fd " +
                                         std::to_string(wire.fd) + ", " + std::to_string(wire.bytes) + " bytes)");
  return {wire.pid, wire.fd, wire.inode, wire.filesystem, wire.offset, wire.bytes};
}

ImportedRanges::~ImportedRanges() {
  for (auto& [start, import] : imports_) {
    if (strict_) {
      unregister_device_range(import.device_view - import.lead);
      munmap(import.device_view - import.lead, import.mapped);
    }
    munmap(import.shadow_view, import.mapped);
  }
}

MappedRange map_shared_range(const SharedRange& range) {
  const std::string what = "memory of process " + std::to_string(range.pid);
  const std::string path = "/proc/" + std::to_string(range.pid) + "/fd/" + std::to_string(range.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    fail(H2_STATUS_UNSUPPORTED, "cannot open " + what + " (" + path + ": " + errno_text() +
                                    "; the process may have ended, be another user's, or live on another node)");
  struct stat info {};
  const bool same = fstat(fd, &info) == 0 && static_cast<uint64_t>(info.st_ino) == range.inode &&
                    static_cast<uint64_t>(info.st_dev) == range.filesystem;
  const bool fits = same && static_cast<uint64_t>(info.st_size) >= range.offset + range.bytes;
  if (!fits) {
    ::close(fd);
    fail(H2_STATUS_UNSUPPORTED,
         what + ": " + path +
             (same ? " is smaller than the exported range" : " is no longer the exported arena (did it restart?)"));
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t first = range.offset / page * page;
  const size_t lead = range.offset - first;
  const size_t mapped = (lead + range.bytes + page - 1) / page * page;
  void* shadow = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(first));
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the memory
  if (shadow == MAP_FAILED)
    fail(H2_STATUS_OUT_OF_MEMORY,
         "cannot map " + std::to_string(range.bytes) + " bytes of " + what + ": " + std::strerror(map_errno));
  return {static_cast<char*>(shadow), mapped, lead};
}

void* ImportedRanges::open(const SharedRange& range) {
  const auto [shadow, mapped, lead] = map_shared_range(range);
  char* device_view = shadow;
  if (strict_) {
    void* guard = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (guard == MAP_FAILED) {
      munmap(shadow, mapped);
      fail(H2_STATUS_OUT_OF_MEMORY, "cannot reserve the device view of an import: " + errno_text());
    }
    device_view = static_cast<char*>(guard);
    register_device_range(device_view, mapped, device_);
  }
  std::lock_guard lock(mutex_);
  Import import{device_view + lead, shadow, mapped, lead, static_cast<size_t>(range.bytes)};
  imports_.emplace(import.device_view, import);
  return import.device_view;
}

void ImportedRanges::close(void* ptr) {
  Import import;
  {
    std::lock_guard lock(mutex_);
    auto it = imports_.find(static_cast<const char*>(ptr));
    if (it == imports_.end())
      fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not an open import of device " + std::to_string(device_) +
                                           " (closed already, or not from mem_import)");
    import = it->second;
    imports_.erase(it);
  }
  if (strict_) {
    unregister_device_range(import.device_view - import.lead);
    munmap(import.device_view - import.lead, import.mapped);
  }
  munmap(import.shadow_view, import.mapped);
}

std::map<const char*, ImportedRanges::Import>::const_iterator ImportedRanges::find(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  auto it = imports_.upper_bound(p);
  if (it == imports_.begin()) return imports_.end();
  --it;
  return p < it->first + it->second.bytes ? it : imports_.end();
}

bool ImportedRanges::holds(const void* ptr) const {
  std::lock_guard lock(mutex_);
  return find(ptr) != imports_.end();
}

void* ImportedRanges::resolve(const void* ptr, size_t bytes, const char* role) const {
  std::lock_guard lock(mutex_);
  auto it = find(ptr);
  if (it == imports_.end()) return nullptr;
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - it->first);
  if (offset + bytes > it->second.bytes)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " runs " + std::to_string(offset + bytes - it->second.bytes) +
                                         " bytes past the end of memory imported from another process");
  return it->second.shadow_view + it->second.lead + offset;
}

}  // namespace h2::cpu_reference
