#include "machine.hpp"

#include "emulator.hpp"

namespace ascend_emulator {

Machine::Machine(Config config) : config_(std::move(config)) {}

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
  if (!slot) slot = std::make_unique<DeviceMemory>(physical, config_.memory_bytes);
  return *slot;
}

void* Machine::view(const void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_)
    if (void* host = memory->view(ptr, bytes)) return host;
  return nullptr;
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

std::vector<std::shared_ptr<Stream>> Machine::streams_of(int32_t device) const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Stream>> found;
  for (const auto& [handle, stream] : streams_)
    if (stream->device() == device) found.push_back(stream);
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
