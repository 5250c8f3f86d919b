#include "device_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "emulator.hpp"

namespace ascend_emulator {
namespace {

constexpr size_t kAlignment = 512;

size_t rounded(size_t bytes) {
  const size_t documented = (bytes + 31) / 32 * 32 + 32;  // aclrtMalloc: round to 32, pad by 32
  return (documented + kAlignment - 1) / kAlignment * kAlignment;
}

[[noreturn]] void system_failure(const std::string& what) {
  throw Error(ACL_ERROR_RT_DRV_INTERNAL_ERROR, what + ": " + std::strerror(errno));
}

}  // namespace

DeviceMemory::DeviceMemory(int physical_device, size_t bytes) : device_(physical_device), bytes_(bytes) {
  const std::string name = "ascend-emulator-hbm-" + std::to_string(physical_device);
  file_ = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (file_ < 0) system_failure("memfd_create for device " + std::to_string(device_));
  if (ftruncate(file_, static_cast<off_t>(bytes_)) != 0) system_failure("sizing device memory");
  void* device = mmap(nullptr, bytes_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, file_, 0);
  if (device == MAP_FAILED) system_failure("mapping device memory");
  void* host = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, file_, 0);
  if (host == MAP_FAILED) {
    munmap(device, bytes_);
    system_failure("mapping device memory");
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
    throw Error(ACL_ERROR_INVALID_PARAM, "aclrtFree: the pointer is not a live allocation of device " +
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

void* DeviceMemory::view(const void* ptr, size_t bytes) const {
  const char* address = static_cast<const char*>(ptr);
  if (address < device_base_ || address >= device_base_ + bytes_) return nullptr;
  const size_t offset = static_cast<size_t>(address - device_base_);
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return nullptr;
  --it;
  if (offset + bytes > it->first + it->second.requested) return nullptr;
  return host_base_ + offset;
}

}  // namespace ascend_emulator
