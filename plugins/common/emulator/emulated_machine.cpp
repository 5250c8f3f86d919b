#include "emulated_machine.hpp"

#include <unistd.h>

#include <cstdio>

namespace h2::emulator {

EmulatedMachine::EmulatedMachine(Config config, const MachineTraits& traits)
    : config_(std::move(config)), traits_(traits), faults_(config_, traits_.variables, traits_.codes) {}

EmulatedMachine::~EmulatedMachine() {
  stop_queues();
}

void EmulatedMachine::stop_queues() {
  // Queues first: their workers may still finish tasks that read memory.
  std::map<const void*, std::shared_ptr<TaskQueue>> queues;
  {
    std::lock_guard lock(mutex_);
    queues.swap(queues_);
  }
  queues.clear();
}

void EmulatedMachine::check_device(int32_t device) const {
  if (device < 0 || device >= device_count())
    throw Error(traits_.invalid_device_code, "device " + std::to_string(device) + " does not exist (" +
                                                 std::to_string(device_count()) + " visible)");
}

DeviceMemory& EmulatedMachine::memory(int32_t device) {
  check_device(device);
  const int physical = config_.visible[static_cast<size_t>(device)];
  std::lock_guard lock(mutex_);
  auto& slot = memory_[physical];
  if (!slot)
    slot = std::make_unique<DeviceMemory>(traits_.memory_name + "-" + std::to_string(physical), physical,
                                          config_.memory_bytes, traits_.rounding, traits_.codes);
  return *slot;
}

void* EmulatedMachine::view(const void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_)
    if (void* host = memory->view(ptr, bytes)) return host;
  for (const Import& import : imports_)
    if (void* host = import.mapping->view(ptr, bytes)) return host;
  return nullptr;
}

void* EmulatedMachine::checked_view(const void* ptr, size_t bytes, const char* role) {
  void* host = view(ptr, bytes);
  if (!host)
    throw Error(traits_.codes.invalid_argument,
                std::string(role) + " [" + std::to_string(reinterpret_cast<uintptr_t>(ptr)) + ", +" +
                    std::to_string(bytes) + ") is not inside one live device allocation");
  return host;
}

std::shared_ptr<TaskQueue> EmulatedMachine::make_queue(int32_t device) {
  return std::make_shared<TaskQueue>(
      device, [this](const std::string& name) { before_task(name); }, traits_.codes.internal);
}

void* EmulatedMachine::add_queue(int32_t device) {
  auto queue = make_queue(device);
  void* handle = queue.get();
  std::lock_guard lock(mutex_);
  queues_.emplace(handle, std::move(queue));
  return handle;
}

std::shared_ptr<TaskQueue> EmulatedMachine::queue(const void* handle) const {
  std::lock_guard lock(mutex_);
  auto it = queues_.find(handle);
  if (it == queues_.end())
    throw Error(traits_.invalid_handle_code,
                handle == nullptr ? "the default queue (NULL) is not emulated" : "not a live queue (destroyed?)");
  return it->second;
}

std::shared_ptr<TaskQueue> EmulatedMachine::take_queue(const void* handle) {
  auto found = queue(handle);
  std::lock_guard lock(mutex_);
  queues_.erase(handle);
  return found;
}

std::vector<std::shared_ptr<TaskQueue>> EmulatedMachine::queues_of(int32_t device) const {
  std::vector<std::shared_ptr<TaskQueue>> found;
  std::lock_guard lock(mutex_);
  for (const auto& [handle, queue] : queues_)
    if (queue->device() == device) found.push_back(queue);
  return found;
}

void* EmulatedMachine::add_marker(int32_t device, bool timing) {
  auto marker = std::make_shared<Marker>(device, timing);
  void* handle = marker.get();
  std::lock_guard lock(mutex_);
  markers_.emplace(handle, std::move(marker));
  return handle;
}

std::shared_ptr<Marker> EmulatedMachine::marker(const void* handle) const {
  std::lock_guard lock(mutex_);
  auto it = markers_.find(handle);
  if (it == markers_.end()) throw Error(traits_.invalid_handle_code, "not a live event (destroyed?)");
  return it->second;
}

void EmulatedMachine::remove_marker(const void* handle) {
  marker(handle);
  std::lock_guard lock(mutex_);
  markers_.erase(handle);
}

void EmulatedMachine::add_pinned(void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  pinned_.emplace(static_cast<const char*>(ptr), bytes);
}

bool EmulatedMachine::remove_pinned(void* ptr) {
  std::lock_guard lock(mutex_);
  return pinned_.erase(static_cast<const char*>(ptr)) != 0;
}

bool EmulatedMachine::is_pinned(const void* ptr, size_t bytes) const {
  const char* address = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  auto it = pinned_.upper_bound(address);
  if (it == pinned_.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

std::string EmulatedMachine::export_range(const void* ptr, size_t bytes, const std::string& tag) {
  std::lock_guard lock(mutex_);
  for (auto& [physical, memory] : memory_) {
    if (memory->view(ptr, 1) == nullptr) continue;
    if (memory->view(ptr, bytes) == nullptr)
      throw Error(traits_.codes.invalid_argument, "the exported range is not inside one allocation");
    const std::string key = "h2emu:" + std::to_string(getpid()) + ":" + std::to_string(memory->file()) + ":" +
                            std::to_string(memory->file_offset(ptr)) + ":" + std::to_string(bytes) + ":" + tag;
    exports_.emplace(key, std::pair{static_cast<const char*>(ptr), bytes});
    return key;
  }
  throw Error(traits_.codes.invalid_argument, "the pointer is not device memory of this process");
}

EmulatedMachine::Imported EmulatedMachine::import_key(const std::string& key) {
  unsigned long long pid = 0, file = 0, offset = 0, size = 0;
  int tag_at = 0;
  if (std::sscanf(key.c_str(), "h2emu:%llu:%llu:%llu:%llu:%n", &pid, &file, &offset, &size, &tag_at) != 4 ||
      tag_at == 0)
    throw Error(traits_.codes.invalid_argument, "'" + key + "' is not a memory key of this runtime");
  if (pid == static_cast<unsigned long long>(getpid()))
    throw Error(traits_.codes.invalid_argument, "the key was exported by this process");
  auto mapping = std::make_unique<ForeignMapping>(pid, file, offset, size, traits_.codes);
  void* device = mapping->device_pointer();
  std::lock_guard lock(mutex_);
  imports_.push_back({std::move(mapping), key});
  return {device, size, key.substr(static_cast<size_t>(tag_at))};
}

bool EmulatedMachine::close_import(const std::string& key, const void* device_pointer) {
  std::lock_guard lock(mutex_);
  for (auto it = imports_.begin(); it != imports_.end(); ++it) {
    if (device_pointer != nullptr ? it->mapping->device_pointer() != device_pointer : it->key != key) continue;
    imports_.erase(it);
    return true;
  }
  return false;
}

bool EmulatedMachine::close_export(const std::string& key) {
  std::lock_guard lock(mutex_);
  return exports_.erase(key) != 0;
}

void EmulatedMachine::close_exports_within(const void* start, size_t bytes) {
  const char* first = static_cast<const char*>(start);
  std::lock_guard lock(mutex_);
  std::erase_if(exports_,
                [&](const auto& entry) { return entry.second.first >= first && entry.second.first < first + bytes; });
}

bool EmulatedMachine::exported(const void* ptr) const {
  const char* address = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  for (const auto& [key, range] : exports_)
    if (address >= range.first && address < range.first + range.second) return true;
  return false;
}

}  // namespace h2::emulator
