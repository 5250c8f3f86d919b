// The C ABI slots that only check their pointers and forward to a plugin's Runtime object, written
// once for the vendor plugins built on one (cuda, ascend, mlu): lifecycle (a Runtime made in
// initialize, taking no plugin options, destroyed in shutdown), devices, memory and the creation and
// teardown of streams and events. What differs per vendor (copies, event queries) stays with the
// plugin. The Runtime provides: device_count(), properties(device, props), allocate(device, bytes),
// release(device, ptr), allocate_async(device, bytes, Stream&), release_async(device, ptr, Stream&),
// memory_info(device, free, total), create_stream(device), destroy_stream(handle), stream(handle),
// synchronize(Stream&), query(Stream&), create_event(device, flags), destroy_event(handle), and a
// constructor from H2_InitArgs; for the host-memory and memory-sharing slots, if a plugin uses them,
// allocate_host(bytes), release_host(ptr), is_device_memory(ptr, bytes), export_memory(device, ptr,
// handle, offset), import_memory(device, handle, bytes) and close_import(device, ptr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "h2/plugin_abi.h"
#include "plugin_error.hpp"
#include "plugin_options.hpp"

namespace h2::plugin {

// The slots of H2_PluginApi a vendor plugin writes itself; RuntimeSlots::api_table fills the rest.
// The host-memory and memory-sharing slots default to RuntimeSlots' own (NULL where a plugin sets
// `shares_memory` false).
struct VendorSlots {
  decltype(H2_PluginApi::stream_wait_event) stream_wait_event;
  decltype(H2_PluginApi::memset_async) memset_async;
  decltype(H2_PluginApi::memcpy_async) memcpy_async;
  decltype(H2_PluginApi::event_record) event_record;
  decltype(H2_PluginApi::event_query) event_query;
  decltype(H2_PluginApi::event_synchronize) event_synchronize;
  decltype(H2_PluginApi::event_elapsed_ms) event_elapsed_ms;
  const H2_OpTable* op_table;
  decltype(H2_PluginApi::host_alloc) host_alloc = nullptr;
  decltype(H2_PluginApi::host_free) host_free = nullptr;
  bool shares_memory = true;
  decltype(H2_PluginApi::mem_export_dmabuf) mem_export_dmabuf = nullptr;  // ABI 1.7, optional
};

// `Slot` is the plugin's holder of its Runtime; `Name` its plugin name (for option errors).
template <typename Runtime, std::unique_ptr<Runtime>& (*Slot)(), const char* Name>
struct RuntimeSlots {
  static Runtime& runtime() {
    if (!Slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is not initialized");
    return *Slot();
  }

  static H2_Status initialize(const H2_InitArgs* args) {
    return guarded("initialize", [&] {
      require(args, "args");
      if (args->struct_size < H2_INIT_ARGS_SIZE_1_0)
        fail(H2_STATUS_INVALID_ARGUMENT, "args->struct_size is smaller than ABI 1.0's H2_InitArgs");
      if (Slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is already initialized");
      // It takes no options; any key is refused rather than ignored (ABI 1.4).
      read_init_options(*args, nullptr, 0, Name);
      Slot() = std::make_unique<Runtime>(*args);
    });
  }

  // No documented keys (ABI 1.4): `h2 devices --plugin NAME --options` says it takes none.
  static H2_Status option_list(const H2_OptionInfo** infos, size_t* count) {
    return guarded("option_list", [&] {
      require(infos, "infos");
      require(count, "count");
      *infos = nullptr;
      *count = 0;
    });
  }

  static H2_Status shutdown() {
    return guarded("shutdown", [&] { Slot().reset(); });
  }

  static const char* get_last_error() { return last_error(); }

  static H2_Status device_count(int32_t* count) {
    return guarded("device_count", [&] {
      require(count, "count");
      *count = runtime().device_count();
    });
  }

  static H2_Status device_properties(int32_t device, H2_DeviceProperties* props) {
    return guarded("device_properties", [&] {
      require(props, "props");
      runtime().properties(device, *props);
    });
  }

  static H2_Status mem_alloc(int32_t device, size_t bytes, void** ptr) {
    return guarded("mem_alloc", [&] {
      require(ptr, "ptr");
      *ptr = runtime().allocate(device, bytes);
    });
  }

  static H2_Status mem_free(int32_t device, void* ptr) {
    return guarded("mem_free", [&] {
      require(ptr, "ptr");
      runtime().release(device, ptr);
    });
  }

  static H2_Status mem_alloc_async(int32_t device, size_t bytes, H2_Stream* stream, void** ptr) {
    return guarded("mem_alloc_async", [&] {
      require(ptr, "ptr");
      *ptr = runtime().allocate_async(device, bytes, *runtime().stream(stream));
    });
  }

  static H2_Status mem_free_async(int32_t device, void* ptr, H2_Stream* stream) {
    return guarded("mem_free_async", [&] {
      require(ptr, "ptr");
      runtime().release_async(device, ptr, *runtime().stream(stream));
    });
  }

  static H2_Status mem_info(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes) {
    return guarded("mem_info", [&] {
      require(free_bytes, "free_bytes");
      require(total_bytes, "total_bytes");
      runtime().memory_info(device, *free_bytes, *total_bytes);
    });
  }

  static H2_Status stream_create(int32_t device, H2_Stream** stream) {
    return guarded("stream_create", [&] {
      require(stream, "stream");
      *stream = runtime().create_stream(device);
    });
  }

  static H2_Status stream_destroy(H2_Stream* stream) {
    return guarded("stream_destroy", [&] { runtime().destroy_stream(stream); });
  }

  static H2_Status stream_synchronize(H2_Stream* stream) {
    return guarded("stream_synchronize", [&] { runtime().synchronize(*runtime().stream(stream)); });
  }

  static H2_Status stream_query(H2_Stream* stream) {
    return guarded("stream_query", [&] { return runtime().query(*runtime().stream(stream)); });
  }

  static H2_Status event_create(int32_t device, uint32_t flags, H2_Event** event) {
    return guarded("event_create", [&] {
      require(event, "event");
      *event = runtime().create_event(device, flags);
    });
  }

  static H2_Status event_destroy(H2_Event* event) {
    return guarded("event_destroy", [&] { runtime().destroy_event(event); });
  }

  // The plugin's whole table: `name` and H2_VERSION, the vendor's slots, and these.
  static H2_PluginApi api_table(const char* name, const VendorSlots& vendor) {
    H2_PluginApi api{};
    api.struct_size = sizeof(H2_PluginApi);
    api.abi_major = H2_ABI_MAJOR;
    api.abi_minor = H2_ABI_MINOR;
    api.plugin_name = name;
    api.plugin_version = H2_VERSION;
    api.initialize = initialize;
    api.shutdown = shutdown;
    api.last_error = get_last_error;
    api.device_count = device_count;
    api.device_properties = device_properties;
    api.mem_alloc = mem_alloc;
    api.mem_free = mem_free;
    api.mem_info = mem_info;
    api.stream_create = stream_create;
    api.stream_destroy = stream_destroy;
    api.stream_synchronize = stream_synchronize;
    api.stream_query = stream_query;
    api.stream_wait_event = vendor.stream_wait_event;
    api.memset_async = vendor.memset_async;
    api.memcpy_async = vendor.memcpy_async;
    api.event_create = event_create;
    api.event_destroy = event_destroy;
    api.event_record = vendor.event_record;
    api.event_query = vendor.event_query;
    api.event_synchronize = vendor.event_synchronize;
    api.event_elapsed_ms = vendor.event_elapsed_ms;
    api.op_table = vendor.op_table;
    api.mem_alloc_async = mem_alloc_async;
    api.mem_free_async = mem_free_async;
    api.option_list = option_list;
    api.host_alloc = vendor.host_alloc;
    api.host_free = vendor.host_free;
    api.mem_export_dmabuf = vendor.mem_export_dmabuf;
    if constexpr (requires(Runtime & r, H2_MemHandle & h, uint64_t & n) {
                    r.allocate_host(size_t{});
                    r.export_memory(0, nullptr, h, n);
                  }) {
      if (!api.host_alloc) api.host_alloc = host_alloc;
      if (!api.host_free) api.host_free = host_free;
      if (vendor.shares_memory) {
        api.mem_export = mem_export;
        api.mem_import = mem_import;
        api.mem_close = mem_close;
      }
    }
    return api;
  }

  static H2_Status host_alloc(size_t bytes, void** ptr) {
    return guarded("host_alloc", [&] {
      require(ptr, "ptr");
      *ptr = runtime().allocate_host(bytes);
    });
  }

  static H2_Status host_free(void* ptr) {
    return guarded("host_free", [&] {
      require(ptr, "ptr");
      runtime().release_host(ptr);
    });
  }

  static H2_Status mem_export(int32_t device, const void* ptr, H2_MemHandle* handle, uint64_t* offset) {
    return guarded("mem_export", [&] {
      require(ptr, "ptr");
      require(handle, "handle");
      require(offset, "offset");
      runtime().export_memory(device, ptr, *handle, *offset);
    });
  }

  static H2_Status mem_import(int32_t device, const H2_MemHandle* handle, void** ptr, uint64_t* bytes) {
    return guarded("mem_import", [&] {
      require(handle, "handle");
      require(ptr, "ptr");
      require(bytes, "bytes");
      *ptr = runtime().import_memory(device, *handle, *bytes);
    });
  }

  static H2_Status mem_close(int32_t device, void* ptr) {
    return guarded("mem_close", [&] {
      require(ptr, "ptr");
      runtime().close_import(device, ptr);
    });
  }

  // The checks memcpy_async makes before a plugin enqueues the copy: a known kind, no overlap, and
  // each side in the memory its kind says (device memory inside one live allocation of the plugin).
  // Returns the kind as a number.
  static uint32_t checked_copy(void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
    const uint32_t direction = enum_bits(kind);
    if (direction < H2_MEMCPY_HOST_TO_DEVICE || direction > H2_MEMCPY_DEVICE_TO_DEVICE)
      fail(H2_STATUS_INVALID_ARGUMENT, "unknown copy kind " + std::to_string(direction));
    const char* a = static_cast<const char*>(dst);
    const char* b = static_cast<const char*>(src);
    if (bytes > 0 && a < b + bytes && b < a + bytes) fail(H2_STATUS_INVALID_ARGUMENT, "source and destination overlap");
    if (bytes == 0) return direction;
    switch (direction) {
      case H2_MEMCPY_HOST_TO_DEVICE:
        check_host_pointer(src, "source");
        check_device_range(dst, bytes, "destination");
        break;
      case H2_MEMCPY_DEVICE_TO_HOST:
        check_device_range(src, bytes, "source");
        check_host_pointer(dst, "destination");
        break;
      default: check_device_range(src, bytes, "source"); check_device_range(dst, bytes, "destination");
    }
    return direction;
  }

  // event_record's lookup: the stream and the event, which must belong to one device.
  static auto event_on_stream(H2_Event* event, H2_Stream* stream) {
    auto s = runtime().stream(stream);
    auto e = runtime().event(event);
    if (e->device != s->device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the event belongs to device " + std::to_string(e->device) +
                                           " and the stream to device " + std::to_string(s->device));
    return std::pair{s, e};
  }

  // event_elapsed_ms's lookup: two events that keep timings and have been recorded.
  static auto timed_events(H2_Event* start, H2_Event* end, float* milliseconds) {
    require(milliseconds, "milliseconds");
    auto first = runtime().event(start);
    auto second = runtime().event(end);
    if (!first->timing || !second->timing)
      fail(H2_STATUS_INVALID_ARGUMENT, "an event was created with H2_EVENT_DISABLE_TIMING");
    if (!first->recorded || !second->recorded) fail(H2_STATUS_INVALID_ARGUMENT, "an event has never been recorded");
    return std::pair{first, second};
  }

  static void check_device_range(const void* ptr, size_t bytes, const char* role) {
    require(ptr, role);
    if (!runtime().is_device_memory(ptr, bytes))
      fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) +
                                           " is not inside one live device allocation of this plugin (" +
                                           std::to_string(bytes) + " bytes)");
  }

  static void check_host_pointer(const void* ptr, const char* role) {
    require(ptr, role);
    if (runtime().is_device_memory(ptr, 1))
      fail(H2_STATUS_INVALID_ARGUMENT,
           std::string(role) + " is device memory but the copy kind says it is host memory");
  }
};

}  // namespace h2::plugin
