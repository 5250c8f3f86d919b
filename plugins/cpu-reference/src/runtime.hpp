// The state of an initialized cpu-reference plugin: its devices' memory, the live streams, events
// and pinned host allocations, and the core's logger. Handles given to the core are checked against
// these registries, so a stale or foreign handle is an error message, not a crash.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "config.hpp"
#include "device_memory.hpp"
#include "h2/plugin_abi.h"
#include "handle_registry.hpp"
#include "ops/parallel.hpp"
#include "stream.hpp"

namespace h2::cpu_reference {

class Runtime {
 public:
  Runtime(const Config& config, const H2_InitArgs& args);
  ~Runtime();

  int device_count() const { return static_cast<int>(memory_.size()); }
  uint32_t op_dtypes() const { return config_.op_dtypes; }  // H2_CPU_REFERENCE_OP_DTYPES
  // H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE: bytes, 0 for never.
  uint64_t collectives_in_place() const { return config_.collectives_in_place; }
  void properties(int device, H2_DeviceProperties& props) const;

  DeviceMemory& memory(int device) const;
  // The device whose address range holds `ptr`, or nullptr.
  DeviceMemory* owner_of(const void* ptr) const;

  void* host_alloc(size_t bytes);
  void host_free(void* ptr);

  // `host_inline` (H2_STREAM_HOST_INLINE), or the plugin's blocking mode, makes a blocking stream.
  H2_Stream* create_stream(int device, bool host_inline = false);
  void destroy_stream(H2_Stream* handle);
  std::shared_ptr<Stream> stream(H2_Stream* handle) const;

  H2_Event* create_event(int device, uint32_t flags);
  void destroy_event(H2_Event* handle);
  std::shared_ptr<Event> event(H2_Event* handle) const;

  // Waits until every stream is idle (mem_free and host_free: queued work must not touch freed memory).
  void wait_all_streams() const;

  void log(H2_LogLevel level, const std::string& message) const;

  // The threads operators compute with.
  ThreadPool& pool() { return pool_; }

 private:
  void check_device(int device) const;

  Config config_;
  H2_LogFn log_fn_;
  void* log_user_data_;
  uint32_t log_level_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  ThreadPool pool_;

  mutable std::mutex mutex_;
  std::set<void*> host_allocations_;  // guarded by mutex_
  h2::plugin::HandleRegistry<H2_Stream, Stream> streams_{"stream"};
  h2::plugin::HandleRegistry<H2_Event, Event> events_{"event"};
};

}  // namespace h2::cpu_reference
