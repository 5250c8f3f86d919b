// The emulated machine between aclInit and aclFinalize: its devices and their memory, the streams and
// events handed out, pinned host memory, the threads subscribed for callbacks, and injected faults.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ascend/acl_runtime.h"
#include "ascend_config.hpp"
#include "device_memory.hpp"
#include "stream.hpp"

namespace ascend_emulator {

using h2::emulator::DeviceMemory;

// One aclrtRecordEvent: done once its stream has reached it. A wait holds the record it saw, so a
// later record of the same event never releases it.
struct EventRecord {
  bool done = false;
  std::chrono::steady_clock::time_point done_at{};
};

struct Event {
  int32_t device = 0;
  uint32_t flags = 0;
  std::mutex mutex;  // guards latest and every record's fields
  std::condition_variable record_done;
  std::shared_ptr<EventRecord> latest;  // NULL: never recorded (counts as complete)
};

// Callbacks due for one subscribed thread (aclrtProcessReport runs them).
struct ReportQueue {
  struct Call {
    aclrtCallback fn;
    void* user_data;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Call> calls;
};

class Machine {
 public:
  explicit Machine(Config config);
  ~Machine();

  const Config& config() const { return config_; }
  int32_t device_count() const { return static_cast<int32_t>(config_.visible.size()); }
  void check_device(int32_t device) const;
  DeviceMemory& memory(int32_t device);
  // The live allocation holding [ptr, ptr + bytes) on any device: its writable view, or nullptr.
  void* view(const void* ptr, size_t bytes);

  aclrtStream add_stream(int32_t device);
  std::shared_ptr<Stream> stream(aclrtStream handle) const;  // throws for an unknown handle
  std::shared_ptr<Stream> take_stream(aclrtStream handle);

  aclrtEvent add_event(int32_t device, uint32_t flags);
  std::shared_ptr<Event> event(aclrtEvent handle) const;
  void remove_event(aclrtEvent handle);

  void add_pinned(void* ptr, size_t bytes);
  void remove_pinned(void* ptr);
  bool is_pinned(const void* ptr, size_t bytes) const;

  ReportQueue& report_queue(uint64_t thread_id);

  // IPC (aclrtIpcMem*): a key for [ptr, ptr + bytes) of a live allocation; a device pointer of this
  // process for another process's key (the other process's memory file mapped twice, as our own);
  // closing either. A key names "h2emu" with the exporter's pid, memory file, offset, size and flags.
  std::string export_key(void* ptr, size_t bytes, uint64_t flags);
  void* import_key(const std::string& key);
  void close_key(const std::string& key);
  // Whether an open export key covers `ptr` (CANN: close the key before freeing the memory).
  bool exported(const void* ptr) const;

  // Called before every copy or kernel runs: counts it and applies injected faults.
  void before_task(const std::string& name);
  // Throws LOST_HEARTBEAT once the device has been lost (injected).
  void check_alive() const;

 private:
  Config config_;
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<DeviceMemory>> memory_;  // by physical device, made on first use
  std::map<aclrtStream, std::shared_ptr<Stream>> streams_;
  std::map<aclrtEvent, std::shared_ptr<Event>> events_;
  std::map<const char*, size_t> pinned_;
  std::map<uint64_t, std::unique_ptr<ReportQueue>> reports_;
  struct Import {
    std::unique_ptr<h2::emulator::ForeignMapping> mapping;
    std::string key;
  };
  std::vector<Import> imports_;
  std::map<std::string, std::pair<const char*, size_t>> exports_;  // key -> exported range
  h2::emulator::Faults faults_;
};

// The machine after aclInit; throws ACL_ERROR_UNINITIALIZE before it or after aclFinalize.
Machine& machine();
std::unique_ptr<Machine>& machine_slot();

}  // namespace ascend_emulator
