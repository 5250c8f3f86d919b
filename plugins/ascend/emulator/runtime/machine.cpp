#include "machine.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "emulator.hpp"

namespace ascend_emulator {

Machine::Machine(Config config) : config_(std::move(config)) {}

Machine::~Machine() {
  // Streams first: their workers may still finish tasks that read memory.
  streams_.clear();
  for (const Import& import : imports_) {
    munmap(import.device_map, import.map_length);
    munmap(import.host_map, import.map_length);
  }
}

void Machine::check_device(int32_t device) const {
  if (device < 0 || device >= device_count())
    throw Error(ACL_ERROR_RT_INVALID_DEVICEID, "device " + std::to_string(device) + " does not exist (" +
                                                   std::to_string(device_count()) + " visible)");
}

DeviceMemory& Machine::memory(int32_t device) {
  check_device(device);
  const int physical = config_.visible[static_cast<size_t>(device)];
  std::lock_guard lock(mutex_);
  auto& slot = memory_[physical];
  if (!slot) slot = std::make_unique<DeviceMemory>(physical, config_.memory_bytes);
  return *slot;
}

void* Machine::view(const void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_)
    if (void* host = memory->view(ptr, bytes)) return host;
  const char* address = static_cast<const char*>(ptr);
  for (const Import& import : imports_) {
    const char* start = import.device_map + import.skip;
    if (address >= start && address + bytes <= start + import.size)
      return import.host_map + (address - import.device_map);
  }
  return nullptr;
}

std::string Machine::export_key(void* ptr, size_t bytes, uint64_t flags) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_) {
    if (memory->view(ptr, 1) == nullptr) continue;
    if (memory->view(ptr, bytes) == nullptr)
      throw Error(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcMemGetExportKey: [devPtr, devPtr + size) is not inside one allocation");
    const std::string key = "h2emu:" + std::to_string(getpid()) + ":" + std::to_string(memory->file()) + ":" +
                            std::to_string(memory->file_offset(ptr)) + ":" + std::to_string(bytes) + ":" +
                            std::to_string(flags);
    if (key.size() >= ACL_RT_IPC_MEM_KEY_LENGTH) throw Error(ACL_ERROR_INTERNAL_ERROR, "an IPC key grew too long");
    exports_.emplace(key, std::pair{static_cast<const char*>(ptr), bytes});
    return key;
  }
  throw Error(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemGetExportKey: devPtr is not device memory of this process");
}

void* Machine::import_key(const std::string& key) {
  unsigned long long pid = 0, file = 0, offset = 0, size = 0, flags = 0;
  if (std::sscanf(key.c_str(), "h2emu:%llu:%llu:%llu:%llu:%llu", &pid, &file, &offset, &size, &flags) != 5)
    throw Error(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemImportByKey: '" + key + "' is not an IPC key of this runtime");
  if (flags != ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
    throw Error(ACL_ERROR_RT_NO_PERMISSION,
                "aclrtIpcMemImportByKey: the key was exported with pid validation and "
                "aclrtIpcMemSetImportPid is not emulated; export with "
                "ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION");
  if (pid == static_cast<unsigned long long>(getpid()))
    throw Error(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemImportByKey: the key was exported by this process");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(file);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    throw Error(ACL_ERROR_RT_NO_PERMISSION, "aclrtIpcMemImportByKey: the exporting process " + std::to_string(pid) +
                                                " cannot be reached (" + std::strerror(errno) + ")");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page, skip = offset - start, length = skip + size;
  void* device = mmap(nullptr, length, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(start));
  void* host = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(start));
  ::close(fd);
  if (device == MAP_FAILED || host == MAP_FAILED) {
    if (device != MAP_FAILED) munmap(device, length);
    if (host != MAP_FAILED) munmap(host, length);
    throw Error(ACL_ERROR_RT_DRV_INTERNAL_ERROR, "aclrtIpcMemImportByKey: mapping the shared memory failed");
  }
  std::lock_guard lock(mutex_);
  imports_.push_back({static_cast<char*>(device), static_cast<char*>(host), length, skip, size, key});
  return static_cast<char*>(device) + skip;
}

bool Machine::exported(const void* ptr) const {
  const char* address = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  for (const auto& [key, range] : exports_)
    if (address >= range.first && address < range.first + range.second) return true;
  return false;
}

void Machine::close_key(const std::string& key) {
  std::lock_guard lock(mutex_);
  for (auto it = imports_.begin(); it != imports_.end(); ++it) {
    if (it->key != key) continue;
    munmap(it->device_map, it->map_length);
    munmap(it->host_map, it->map_length);
    imports_.erase(it);
    return;
  }
  if (exports_.erase(key) == 0)
    throw Error(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemClose: '" + key + "' is not an open IPC key of this process");
}

aclrtStream Machine::add_stream(int32_t device) {
  auto stream = std::make_shared<Stream>(*this, device);
  auto* handle = static_cast<aclrtStream>(stream.get());
  std::lock_guard lock(mutex_);
  streams_.emplace(handle, std::move(stream));
  return handle;
}

std::shared_ptr<Stream> Machine::stream(aclrtStream handle) const {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(handle);
  if (it == streams_.end())
    throw Error(ACL_ERROR_RT_INVALID_HANDLE,
                handle == nullptr ? "the default stream (NULL) is not emulated" : "not a live stream (destroyed?)");
  return it->second;
}

std::shared_ptr<Stream> Machine::take_stream(aclrtStream handle) {
  auto found = stream(handle);
  std::lock_guard lock(mutex_);
  streams_.erase(handle);
  return found;
}

aclrtEvent Machine::add_event(int32_t device, uint32_t flags) {
  auto event = std::make_shared<Event>();
  event->device = device;
  event->flags = flags;
  auto* handle = static_cast<aclrtEvent>(event.get());
  std::lock_guard lock(mutex_);
  events_.emplace(handle, std::move(event));
  return handle;
}

std::shared_ptr<Event> Machine::event(aclrtEvent handle) const {
  std::lock_guard lock(mutex_);
  auto it = events_.find(handle);
  if (it == events_.end()) throw Error(ACL_ERROR_RT_INVALID_HANDLE, "not a live event (destroyed?)");
  return it->second;
}

void Machine::remove_event(aclrtEvent handle) {
  event(handle);
  std::lock_guard lock(mutex_);
  events_.erase(handle);
}

void Machine::add_pinned(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  pinned_.emplace(static_cast<const char*>(ptr), bytes);
}

void Machine::remove_pinned(void* ptr) {
  std::lock_guard lock(mutex_);
  if (pinned_.erase(static_cast<const char*>(ptr)) == 0)
    throw Error(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: the pointer is not from aclrtMallocHost");
}

bool Machine::is_pinned(const void* ptr, size_t bytes) const {
  const char* address = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  auto it = pinned_.upper_bound(address);
  if (it == pinned_.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

ReportQueue& Machine::report_queue(uint64_t thread_id) {
  std::lock_guard lock(mutex_);
  auto& slot = reports_[thread_id];
  if (!slot) slot = std::make_unique<ReportQueue>();
  return *slot;
}

void Machine::before_task(const std::string& name) {
  check_alive();
  const int64_t count = ++tasks_run_;
  if (config_.lost_after_tasks >= 0 && count > config_.lost_after_tasks) {
    lost_ = true;
    check_alive();
  }
  if (!config_.failing_kernel.empty() && name == config_.failing_kernel)
    throw Error(ACL_ERROR_RT_AICORE_EXCEPTION, "AI core exception in " + name + " (injected by ASCEND_EMULATOR_FAIL)");
}

void Machine::check_alive() const {
  if (lost_)
    throw Error(ACL_ERROR_RT_LOST_HEARTBEAT,
                "the device stopped answering (lost heartbeat; injected by ASCEND_EMULATOR_FAIL=lost_after)");
}

std::unique_ptr<Machine>& machine_slot() {
  // Never destroyed: a process may exit (std::exit) while streams and callback threads still run,
  // and they must not find the machine freed under them by static destruction.
  static auto* slot = new std::unique_ptr<Machine>();
  return *slot;
}

Machine& machine() {
  auto& slot = machine_slot();
  if (!slot) throw Error(ACL_ERROR_UNINITIALIZE, "AscendCL is not initialized (call aclInit first)");
  return *slot;
}

}  // namespace ascend_emulator
