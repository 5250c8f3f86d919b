// The state of an initialized MLU plugin: CNRT and CNNL loaded, the devices and their properties, the
// streams and events handed out (one cnrtQueue_t with its own CNNL handle, or one cnrtNotifier_t,
// each), the memory bookkeeping the runtime does not answer (plugins/common/allocation_book.hpp), and
// host copies staged through page-locked memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocation_book.hpp"
#include "cnnl_library.hpp"
#include "cnrt_staging.hpp"
#include "device_binding.hpp"
#include "event_memory.hpp"
#include "h2/plugin_abi.h"
#include "handle_registry.hpp"

namespace h2::mlu {

struct Stream {
  int32_t device = 0;
  uint64_t id = 0;  // never reused, unlike the handle's address
  cnrtQueue_t queue = nullptr;
  cnnlHandle_t cnnl = nullptr;  // bound to `queue`: operators on this stream go through it
  std::mutex mutex;             // guards sticky
  std::string sticky;           // the first asynchronous error the queue reported
  H2_Status sticky_status = H2_STATUS_OK;
};

struct Event {
  int32_t device = 0;
  cnrtNotifier_t notifier = nullptr;
  bool timing = true;
  std::atomic<bool> recorded = false;
};

struct DeviceInfo {
  std::string name;  // cnrtGetDeviceProperties: "MLU370-X8"
  uint64_t total_memory = 0;
  uint32_t cores = 0;  // clusters x cores per cluster
};

// The memory slots come from EventMemory (plugins/common/event_memory.hpp) on CNRT's malloc, free
// and notifiers; the hooks it calls are below.
class Runtime : public h2::plugin::EventMemory<Runtime, Stream, cnrtNotifier_t> {
 public:
  explicit Runtime(const H2_InitArgs& args);  // throws PluginError: RUNTIME_MISSING, NO_DEVICE, ...
  ~Runtime();

  const CnrtLibrary& cnrt() const { return *cnrt_; }
  const CnnlLibrary& cnnl() const { return *cnnl_; }
  int32_t device_count() const { return static_cast<int32_t>(devices_.size()); }
  void check_device(int32_t device) const;
  // Makes `device` current on the calling thread (CNRT's memory, queue and notifier calls act on it).
  void bind(int32_t device) const;
  void properties(int32_t device, H2_DeviceProperties& props) const;
  void memory_info(int32_t device, uint64_t& free_bytes, uint64_t& total_bytes) const;

  // Device memory shared between processes (ABI 1.3) on CNRT's IPC handles: the allocation holding
  // `ptr` is shared whole, with the offset of `ptr` in it; another process maps the handle.
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
  friend class h2::plugin::EventMemory<Runtime, Stream, cnrtNotifier_t>;
  using Allocation = h2::plugin::Allocation;

  // EventMemory's hooks.
  std::string device_name(int32_t device) const;
  bool vendor_malloc(size_t bytes, void** ptr, std::string& why);
  void vendor_free(void* ptr);
  void* vendor_host_malloc(size_t bytes);
  void vendor_host_free(void* ptr);
  cnrtNotifier_t event_create();
  void event_destroy(cnrtNotifier_t notifier) noexcept;
  void event_record(cnrtNotifier_t notifier, Stream& stream);
  bool event_done(cnrtNotifier_t notifier) noexcept;
  void event_wait(cnrtNotifier_t notifier) noexcept;
  void stream_wait(Stream& stream, cnrtNotifier_t notifier);
  void wait_for_streams(int32_t device);
  void before_free(Allocation&) {}  // CNRT has no export key to close

  std::unique_ptr<CnrtLibrary> cnrt_;
  std::unique_ptr<CnnlLibrary> cnnl_;
  h2::plugin::DeviceBinding binding_;
  std::vector<DeviceInfo> devices_;
  std::unique_ptr<CnrtStagingRuntime> staging_runtime_;
  std::unique_ptr<h2::plugin::HostStaging> staging_;

  std::atomic<uint64_t> next_stream_id_{1};
  h2::plugin::HandleRegistry<H2_Stream, Stream> streams_{"stream"};
  h2::plugin::HandleRegistry<H2_Event, Event> events_{"event"};
};

Runtime& runtime();  // throws when the plugin is not initialized
std::unique_ptr<Runtime>& runtime_slot();

}  // namespace h2::mlu
