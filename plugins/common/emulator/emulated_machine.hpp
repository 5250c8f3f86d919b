// What every emulated vendor runtime has between its start and its end: devices and their memory
// (made on first use), the queues and markers (streams and events) handed out by address, page-locked
// host memory, memory shared with other processes, and injected faults. A vendor's machine adds what
// is its own (Ascend's callback threads) and names its queue type by overriding make_queue.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_memory.hpp"
#include "emulator_config.hpp"
#include "marker.hpp"
#include "task_queue.hpp"

namespace h2::emulator {

struct MachineTraits {
  ConfigVariables variables;
  VendorCodes codes;
  int invalid_device_code;  // a device ordinal that does not exist
  int invalid_handle_code;  // a queue or marker that is not live
  std::string memory_name;  // the memory files' prefix: "<name>-<physical device>"
  AllocationRounding rounding;
};

class EmulatedMachine {
 public:
  EmulatedMachine(Config config, const MachineTraits& traits);
  virtual ~EmulatedMachine();

  const Config& config() const { return config_; }
  const MachineTraits& traits() const { return traits_; }
  int32_t device_count() const { return static_cast<int32_t>(config_.visible.size()); }
  void check_device(int32_t device) const;
  DeviceMemory& memory(int32_t device);
  // The live allocation (or import) holding [ptr, ptr + bytes) on any device: its writable view, or
  // nullptr.
  void* view(const void* ptr, size_t bytes);
  // Throws invalid_argument naming `role` unless [ptr, ptr + bytes) is live device memory.
  void* checked_view(const void* ptr, size_t bytes, const char* role);

  void* add_queue(int32_t device);
  std::shared_ptr<TaskQueue> queue(const void* handle) const;  // throws for an unknown handle
  std::shared_ptr<TaskQueue> take_queue(const void* handle);
  std::vector<std::shared_ptr<TaskQueue>> queues_of(int32_t device) const;

  void* add_marker(int32_t device, bool timing);
  std::shared_ptr<Marker> marker(const void* handle) const;
  void remove_marker(const void* handle);

  void add_pinned(void* ptr, size_t bytes);
  bool remove_pinned(void* ptr);  // false when `ptr` is not a page-locked allocation
  bool is_pinned(const void* ptr, size_t bytes) const;

  // Sharing memory between processes: a key for [ptr, ptr + bytes) of a live allocation ("h2emu:" with
  // the exporter's pid, memory file, offset, size and `tag`); a device pointer of this process for
  // another process's key (its memory file mapped twice, as our own); closing either.
  std::string export_range(const void* ptr, size_t bytes, const std::string& tag);
  struct Imported {
    void* device_pointer;
    size_t bytes;
    std::string tag;
  };
  Imported import_key(const std::string& key);
  // Unmaps the import with `key` (or starting at `device_pointer`); false when there is none.
  bool close_import(const std::string& key, const void* device_pointer = nullptr);
  bool close_export(const std::string& key);
  void close_exports_within(const void* start, size_t bytes);  // every export inside the range
  bool exported(const void* ptr) const;                        // whether an open export covers `ptr`

  // Called before every copy or kernel runs: counts it and applies injected faults.
  void before_task(const std::string& name) { faults_.before_task(name); }
  // Throws device_lost once the device has been lost (injected).
  void check_alive() const { faults_.check_alive(); }

 protected:
  virtual std::shared_ptr<TaskQueue> make_queue(int32_t device);
  // Destroys every queue (their workers finish first); a derived machine's destructor calls it
  // before its own state goes.
  void stop_queues();

 private:
  Config config_;
  const MachineTraits& traits_;
  h2::emulator::Faults faults_;
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<DeviceMemory>> memory_;  // by physical device, made on first use
  std::map<const void*, std::shared_ptr<TaskQueue>> queues_;
  std::map<const void*, std::shared_ptr<Marker>> markers_;
  std::map<const char*, size_t> pinned_;
  struct Import {
    std::unique_ptr<ForeignMapping> mapping;
    std::string key;
  };
  std::vector<Import> imports_;
  std::map<std::string, std::pair<const char*, size_t>> exports_;  // key -> exported range
};

}  // namespace h2::emulator
