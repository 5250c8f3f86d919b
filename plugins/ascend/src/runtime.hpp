// The state of an initialized Ascend plugin: AscendCL loaded and initialized, its devices and their
// properties, the streams and events handed out (one aclrtStream or aclrtEvent each), every live
// device allocation (so a pointer of another plugin or a freed one is an error naming it, not a
// fault in the runtime), device memory ordered by streams, and host copies staged through
// page-locked memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "acl_library.hpp"
#include "acl_staging.hpp"
#include "aclnn_library.hpp"
#include "allocation_book.hpp"
#include "callback_thread.hpp"
#include "device_binding.hpp"
#include "event_memory.hpp"
#include "h2/plugin_abi.h"
#include "handle_registry.hpp"

namespace h2::ascend {

struct Stream {
  int32_t device = 0;
  uint64_t id = 0;  // never reused, unlike the handle's address
  aclrtStream stream = nullptr;
  std::mutex mutex;    // guards sticky
  std::string sticky;  // the first asynchronous error the stream reported
  H2_Status sticky_status = H2_STATUS_OK;
};

struct Event {
  int32_t device = 0;
  aclrtEvent event = nullptr;
  bool timing = true;
  std::atomic<bool> recorded = false;
};

struct DeviceInfo {
  std::string soc;  // aclrtGetSocName: "Ascend910B3"
  uint64_t total_memory = 0;
};

// The memory slots come from EventMemory (plugins/common/event_memory.hpp) on AscendCL's malloc,
// free and events; the hooks it calls are below.
class Runtime : public h2::plugin::EventMemory<Runtime, Stream, aclrtEvent> {
 public:
  explicit Runtime(const H2_InitArgs& args);  // throws PluginError: RUNTIME_MISSING, NO_DEVICE, ...
  ~Runtime();

  const AclLibrary& acl() const { return *acl_; }
  const AclnnLibrary& aclnn() const { return *aclnn_; }
  int32_t device_count() const { return static_cast<int32_t>(devices_.size()); }
  void check_device(int32_t device) const;
  // Makes `device` current on the calling thread (AscendCL's memory, stream and event calls act on it).
  void bind(int32_t device) const;
  void properties(int32_t device, H2_DeviceProperties& props) const;
  void memory_info(int32_t device, uint64_t& free_bytes, uint64_t& total_bytes) const;

  // Device memory shared between processes (ABI 1.3) on AscendCL's IPC keys: the allocation holding
  // `ptr` is exported once (its key kept until it is freed), another process imports the key.
  void export_memory(int32_t device, const void* ptr, H2_MemHandle& handle, uint64_t& offset);
  void* import_memory(int32_t device, const H2_MemHandle& handle, uint64_t& bytes);
  void close_import(int32_t device, void* ptr);

  h2::plugin::HostStaging& staging() { return *staging_; }

  H2_Stream* create_stream(int32_t device);
  void destroy_stream(H2_Stream* handle);
  std::shared_ptr<Stream> stream(H2_Stream* handle) const { return streams_.get(handle); }
  void synchronize(Stream& stream);
  H2_Status query(Stream& stream);

  H2_Event* create_event(int32_t device, uint32_t flags);
  void destroy_event(H2_Event* handle);
  std::shared_ptr<Event> event(H2_Event* handle) const { return events_.get(handle); }

 private:
  friend class h2::plugin::EventMemory<Runtime, Stream, aclrtEvent>;
  using Allocation = h2::plugin::Allocation;
  void require_ipc() const;

  // EventMemory's hooks.
  std::string device_name(int32_t device) const;
  bool vendor_malloc(size_t bytes, void** ptr, std::string& why);
  void vendor_free(void* ptr);
  void* vendor_host_malloc(size_t bytes);
  void vendor_host_free(void* ptr);
  aclrtEvent event_create();
  void event_destroy(aclrtEvent event) noexcept;
  void event_record(aclrtEvent event, Stream& stream);
  bool event_done(aclrtEvent event) noexcept;
  void event_wait(aclrtEvent event) noexcept;
  void stream_wait(Stream& stream, aclrtEvent event);
  void wait_for_streams(int32_t device);
  // Closes an exported allocation's key before its memory is freed (CANN's order).
  void before_free(Allocation& allocation);

  std::unique_ptr<AclLibrary> acl_;
  std::unique_ptr<AclnnLibrary> aclnn_;
  h2::plugin::DeviceBinding binding_;
  std::vector<DeviceInfo> devices_;
  std::vector<std::unique_ptr<CallbackThread>> callback_threads_;  // one per device
  std::unique_ptr<AclStagingRuntime> staging_runtime_;
  std::unique_ptr<h2::plugin::HostStaging> staging_;

  std::atomic<uint64_t> next_stream_id_{1};
  h2::plugin::HandleRegistry<H2_Stream, Stream> streams_{"stream"};
  h2::plugin::HandleRegistry<H2_Event, Event> events_{"event"};
};

Runtime& runtime();  // throws when the plugin is not initialized
std::unique_ptr<Runtime>& runtime_slot();

}  // namespace h2::ascend
