#include "device_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace h2::emulator {
namespace {

[[noreturn]] void system_failure(const VendorCodes& codes, const std::string& what) {
  throw Error(codes.system_failure, what + ": " + std::strerror(errno));
}

}  // namespace

DeviceMemory::DeviceMemory(const std::string& name, int physical_device, size_t bytes, AllocationRounding rounding,
                           const VendorCodes& codes)
    : device_(physical_device), bytes_(bytes), rounding_(rounding), codes_(codes) {
  file_ = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (file_ < 0) system_failure(codes_, "memfd_create for device " + std::to_string(device_));
  if (ftruncate(file_, static_cast<off_t>(bytes_)) != 0) system_failure(codes_, "sizing device memory");
  void* device = mmap(nullptr, bytes_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, file_, 0);
  if (device == MAP_FAILED) system_failure(codes_, "mapping device memory");
  void* host = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, file_, 0);
  if (host == MAP_FAILED) {
    munmap(device, bytes_);
    system_failure(codes_, "mapping device memory");
  }
  device_base_ = static_cast<char*>(device);
  host_base_ = static_cast<char*>(host);
  free_.emplace(0, bytes_);
}

DeviceMemory::~DeviceMemory() {
  munmap(device_base_, bytes_);
  munmap(host_base_, bytes_);
  close(file_);
}

size_t DeviceMemory::rounded(size_t bytes) const {
  const size_t documented = (bytes + rounding_.granule - 1) / rounding_.granule * rounding_.granule + rounding_.padding;
  return (documented + rounding_.alignment - 1) / rounding_.alignment * rounding_.alignment;
}

void* DeviceMemory::allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  std::lock_guard lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const size_t offset = it->first;
    const size_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + size, rest);
    live_.emplace(offset, Block{size, bytes});
    used_ += size;
    return device_base_ + offset;
  }
  return nullptr;
}

void DeviceMemory::release(void* ptr) {
  std::lock_guard lock(mutex_);
  const char* address = static_cast<const char*>(ptr);
  auto it = address >= device_base_ && address < device_base_ + bytes_
                ? live_.find(static_cast<size_t>(address - device_base_))
                : live_.end();
  if (it == live_.end())
    throw Error(codes_.invalid_argument, std::string(codes_.free_call) +
                                             ": the pointer is not a live allocation of device " +
                                             std::to_string(device_) + " (freed twice, or an interior pointer?)");
  size_t offset = it->first;
  size_t size = it->second.size;
  live_.erase(it);
  used_ -= size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += size;
      return;
    }
  }
  free_.emplace(offset, size);
}

size_t DeviceMemory::free_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_ - used_;
}

std::pair<void*, size_t> DeviceMemory::allocation_of(const void* ptr) const {
  const char* address = static_cast<const char*>(ptr);
  if (address < device_base_ || address >= device_base_ + bytes_) return {nullptr, 0};
  const size_t offset = static_cast<size_t>(address - device_base_);
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return {nullptr, 0};
  --it;
  if (offset >= it->first + it->second.requested) return {nullptr, 0};
  return {device_base_ + it->first, it->second.requested};
}

void* DeviceMemory::view(const void* ptr, size_t bytes) const {
  const auto [start, size] = allocation_of(ptr);
  if (start == nullptr) return nullptr;
  const char* address = static_cast<const char*>(ptr);
  if (address + bytes > static_cast<const char*>(start) + size) return nullptr;
  return host_base_ + (address - device_base_);
}

ForeignMapping::ForeignMapping(unsigned long long pid, unsigned long long file, size_t offset, size_t size,
                               const VendorCodes& codes)
    : size_(size) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(file);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    throw Error(codes.no_permission,
                "the exporting process " + std::to_string(pid) + " cannot be reached (" + std::strerror(errno) + ")");
  if (size_ == 0) {  // to the end of the memory file
    struct stat status {};
    if (fstat(fd, &status) != 0 || static_cast<size_t>(status.st_size) <= offset) {
      ::close(fd);
      throw Error(codes.invalid_argument, "the shared memory's offset lies outside the exporter's memory");
    }
    size_ = static_cast<size_t>(status.st_size) - offset;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  skip_ = offset - start;
  length_ = skip_ + size_;
  void* device = mmap(nullptr, length_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(start));
  void* host =
      mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(start));
  ::close(fd);
  if (device == MAP_FAILED || host == MAP_FAILED) {
    if (device != MAP_FAILED) munmap(device, length_);
    if (host != MAP_FAILED) munmap(host, length_);
    throw Error(codes.system_failure, "mapping the shared memory failed");
  }
  device_map_ = static_cast<char*>(device);
  host_map_ = static_cast<char*>(host);
}

ForeignMapping::~ForeignMapping() {
  munmap(device_map_, length_);
  munmap(host_map_, length_);
}

void* ForeignMapping::view(const void* ptr, size_t bytes) const {
  const char* address = static_cast<const char*>(ptr);
  const char* start = device_map_ + skip_;
  if (address < start || address + bytes > start + size_) return nullptr;
  return host_map_ + (address - device_map_);
}

}  // namespace h2::emulator
