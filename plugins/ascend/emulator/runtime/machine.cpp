#include "machine.hpp"

#include <unistd.h>

#include <cstdio>

#include "emulator.hpp"

namespace ascend_emulator {
namespace {

// aclrtMalloc rounds sizes to 32 bytes and pads by 32; blocks are aligned to 512 bytes.
constexpr h2::emulator::AllocationRounding kAclrtMallocRounding{.granule = 32, .padding = 32, .alignment = 512};

}  // namespace

const h2::emulator::VendorCodes& acl_codes() {
  static const h2::emulator::VendorCodes codes{
      .invalid_argument = ACL_ERROR_INVALID_PARAM,
      .system_failure = ACL_ERROR_RT_DRV_INTERNAL_ERROR,
      .no_permission = ACL_ERROR_RT_NO_PERMISSION,
      .internal = ACL_ERROR_RT_INTERNAL_ERROR,
      .kernel_fault = ACL_ERROR_RT_AICORE_EXCEPTION,
      .device_lost = ACL_ERROR_RT_LOST_HEARTBEAT,
      .free_call = "aclrtFree",
  };
  return codes;
}

Stream::Stream(Machine& machine, int32_t device)
    : TaskQueue(
          device, [&machine](const std::string& name) { machine.before_task(name); }, ACL_ERROR_RT_INTERNAL_ERROR) {}

Machine::Machine(Config config) : config_(std::move(config)), faults_(config_, kConfigVariables, acl_codes()) {}

Machine::~Machine() {
  // Streams first: their workers may still finish tasks that read memory.
  streams_.clear();
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
  if (!slot)
    slot = std::make_unique<DeviceMemory>("ascend-emulator-hbm-" + std::to_string(physical), physical,
                                          config_.memory_bytes, kAclrtMallocRounding, acl_codes());
  return *slot;
}

void* Machine::view(const void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_)
    if (void* host = memory->view(ptr, bytes)) return host;
  for (const Import& import : imports_)
    if (void* host = import.mapping->view(ptr, bytes)) return host;
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
  auto mapping = std::make_unique<h2::emulator::ForeignMapping>(pid, file, offset, size, acl_codes());
  void* device = mapping->device_pointer();
  std::lock_guard lock(mutex_);
  imports_.push_back({std::move(mapping), key});
  return device;
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
  faults_.before_task(name);
}

void Machine::check_alive() const {
  faults_.check_alive();
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
