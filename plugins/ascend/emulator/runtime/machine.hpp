// The emulated machine between aclInit and aclFinalize: the emulators' common machine (devices and
// their memory, streams and events, pinned host memory, IPC, injected faults) with AscendCL's codes
// and names, plus what is AscendCL's own: the threads subscribed for callbacks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ascend/acl_runtime.h"
#include "ascend_config.hpp"
#include "emulated_machine.hpp"
#include "stream.hpp"

namespace ascend_emulator {

using h2::emulator::DeviceMemory;
using Event = h2::emulator::Marker;

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

class Machine : public h2::emulator::EmulatedMachine {
 public:
  explicit Machine(Config config);
  ~Machine() override;

  aclrtStream add_stream(int32_t device) { return add_queue(device); }
  std::shared_ptr<Stream> stream(aclrtStream handle) const {  // throws for an unknown handle
    return std::static_pointer_cast<Stream>(queue(handle));
  }
  std::shared_ptr<Stream> take_stream(aclrtStream handle) {
    return std::static_pointer_cast<Stream>(take_queue(handle));
  }

  aclrtEvent add_event(int32_t device, uint32_t flags) {
    return add_marker(device, (flags & ACL_EVENT_TIME_LINE) != 0);
  }
  std::shared_ptr<Event> event(aclrtEvent handle) const { return marker(handle); }
  void remove_event(aclrtEvent handle) { remove_marker(handle); }

  ReportQueue& report_queue(uint64_t thread_id);

  // IPC (aclrtIpcMem*): a key for [ptr, ptr + bytes) of a live allocation, tagged with its flags; a
  // device pointer of this process for another process's key; closing either.
  std::string export_key(void* ptr, size_t bytes, uint64_t flags);
  void* import_key(const std::string& key);
  void close_key(const std::string& key);

 protected:
  std::shared_ptr<h2::emulator::TaskQueue> make_queue(int32_t device) override;

 private:
  std::mutex reports_mutex_;
  std::map<uint64_t, std::unique_ptr<ReportQueue>> reports_;
};

// The machine after aclInit; throws ACL_ERROR_UNINITIALIZE before it or after aclFinalize.
Machine& machine();
std::unique_ptr<Machine>& machine_slot();

}  // namespace ascend_emulator
