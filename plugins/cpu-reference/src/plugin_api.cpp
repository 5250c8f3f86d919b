// The cpu-reference plugin's C ABI table and its one exported entry point. Each slot validates its
// arguments, forwards to the Runtime and maps failures to a status plus the thread's last error.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "collectives.hpp"
#include "common.hpp"
#include "config.hpp"
#include "h2/plugin_abi.h"
#include "ops/op_table.hpp"
#include "ops/planted_defects.hpp"
#include "options.hpp"
#include "plugin_options.hpp"
#include "plugin_state.hpp"
#include "runtime.hpp"

#ifndef H2_PLUGIN_NAME
#define H2_PLUGIN_NAME "cpu-reference"
#endif

namespace h2::cpu_reference {
namespace {

H2_Status initialize(const H2_InitArgs* args) {
  return guarded("initialize", [&] {
    require(args, "args");
    if (args->struct_size < H2_INIT_ARGS_SIZE_1_0)
      fail(H2_STATUS_INVALID_ARGUMENT, "args->struct_size is smaller than ABI 1.0's H2_InitArgs");
    if (runtime_slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is already initialized");
    const std::map<std::string, std::string> options =
        read_init_options(*args, option_infos(), option_count(), H2_PLUGIN_NAME);
    const EnvLookup env = [](const char* name) -> std::optional<std::string> {
      const char* value = std::getenv(name);
      return value ? std::optional<std::string>(value) : std::nullopt;
    };
    Config config = read_config(options, env);
    if (args->log != nullptr && args->log_level >= H2_LOG_WARNING)
      for (const std::string& line : overridden_variables(options, env))
        args->log(args->log_user_data, H2_LOG_WARNING, line.c_str());
#ifdef H2_PLANTED_DEFECTS
    const char* defect = std::getenv("H2_PLANTED_DEFECT");
    auto planted = defect_from_name(defect != nullptr ? defect : "none");
    if (!planted)
      fail(H2_STATUS_INVALID_ARGUMENT, std::string("H2_PLANTED_DEFECT='") + defect + "' is not a known defect");
    plant_defect(*planted);
#endif
    runtime_slot() = std::make_unique<Runtime>(config, *args);
  });
}

H2_Status shutdown() {
  return guarded("shutdown", [&] { runtime_slot().reset(); });
}

const char* get_last_error() {
  return last_error();
}

H2_Status device_count(int32_t* count) {
  return guarded("device_count", [&] {
    require(count, "count");
    *count = runtime().device_count();
  });
}

H2_Status device_properties(int32_t device, H2_DeviceProperties* props) {
  return guarded("device_properties", [&] {
    require(props, "props");
    runtime().properties(device, *props);
  });
}

H2_Status mem_alloc(int32_t device, size_t bytes, void** ptr) {
  return guarded("mem_alloc", [&] {
    require(ptr, "ptr");
    *ptr = runtime().memory(device).allocate(bytes);
  });
}

H2_Status mem_alloc_async(int32_t device, size_t bytes, H2_Stream* stream, void** ptr) {
  return guarded("mem_alloc_async", [&] {
    require(ptr, "ptr");
    if (runtime().stream(stream)->device() != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to another device than " + std::to_string(device));
    // The arena hands out memory no queued work uses, so it is ready for the stream at once.
    *ptr = runtime().memory(device).allocate(bytes);
  });
}

H2_Status mem_free_async(int32_t device, void* ptr, H2_Stream* stream) {
  return guarded("mem_free_async", [&] {
    require(ptr, "ptr");
    auto target = runtime().stream(stream);
    if (target->device() != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to another device than " + std::to_string(device));
    DeviceMemory& memory = runtime().memory(device);
    memory.retire(ptr);
    // An ordering task: it runs after a sticky error too, or the memory would never come back.
    target->enqueue_ordering([&memory, ptr] { memory.release(ptr, true); });
  });
}

H2_Status mem_free(int32_t device, void* ptr) {
  return guarded("mem_free", [&] {
    require(ptr, "ptr");
    DeviceMemory& memory = runtime().memory(device);
    memory.resolve(ptr, 0, "pointer");  // reject a foreign pointer before waiting for the streams
    runtime().wait_all_streams();
    memory.release(ptr);
  });
}

H2_Status mem_export_dmabuf(int32_t device, const void* ptr, uint64_t bytes, int32_t* fd, uint64_t* offset) {
  return guarded("mem_export_dmabuf", [&] {
    require(ptr, "ptr");
    require(fd, "fd");
    require(offset, "offset");
    uint64_t within = 0;
    *fd = runtime().memory(device).export_dmabuf(ptr, static_cast<size_t>(bytes), within);
    *offset = within;
  });
}

H2_Status mem_export(int32_t device, const void* ptr, H2_MemHandle* handle, uint64_t* offset) {
  return guarded("mem_export", [&] {
    require(ptr, "ptr");
    require(handle, "handle");
    require(offset, "offset");
    uint64_t within = 0;
    *handle = encode_handle(runtime().memory(device).share(ptr, within));
    *offset = within;
  });
}

H2_Status mem_import(int32_t device, const H2_MemHandle* handle, void** ptr, uint64_t* bytes) {
  return guarded("mem_import", [&] {
    require(handle, "handle");
    require(ptr, "ptr");
    require(bytes, "bytes");
    const SharedRange range = decode_handle(*handle);
    *ptr = runtime().memory(device).imports().open(range);
    *bytes = range.bytes;
  });
}

H2_Status mem_close(int32_t device, void* ptr) {
  return guarded("mem_close", [&] {
    require(ptr, "ptr");
    ImportedRanges& imports = runtime().memory(device).imports();
    if (!imports.holds(ptr))
      fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not an open import of device " + std::to_string(device));
    runtime().wait_all_streams();  // queued work may still read or write it
    imports.close(ptr);
  });
}

H2_Status mem_info(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes) {
  return guarded("mem_info", [&] {
    require(free_bytes, "free_bytes");
    require(total_bytes, "total_bytes");
    DeviceMemory& memory = runtime().memory(device);
    *free_bytes = memory.free_bytes();
    *total_bytes = memory.capacity();
  });
}

H2_Status host_alloc(size_t bytes, void** ptr) {
  return guarded("host_alloc", [&] {
    require(ptr, "ptr");
    *ptr = runtime().host_alloc(bytes);
  });
}

H2_Status host_free(void* ptr) {
  return guarded("host_free", [&] {
    require(ptr, "ptr");
    runtime().host_free(ptr);
  });
}

H2_Status stream_create(int32_t device, H2_Stream** stream) {
  return guarded("stream_create", [&] {
    require(stream, "stream");
    *stream = runtime().create_stream(device);
  });
}

// H2_STREAM_HOST_INLINE gives a blocking stream: every call runs on the caller's thread, which
// saves the wake-up of a worker and runs the work in the caches of the thread that produced its input
// (DiComm's reductions right after a copy). Other bits are hints this plugin does not act on.
H2_Status stream_create_with_flags(int32_t device, uint32_t flags, H2_Stream** stream) {
  return guarded("stream_create_with_flags", [&] {
    require(stream, "stream");
    *stream = runtime().create_stream(device, (flags & H2_STREAM_HOST_INLINE) != 0);
  });
}

H2_Status stream_destroy(H2_Stream* stream) {
  return guarded("stream_destroy", [&] { runtime().destroy_stream(stream); });
}

H2_Status stream_synchronize(H2_Stream* stream) {
  return guarded("stream_synchronize", [&] { runtime().stream(stream)->synchronize(); });
}

H2_Status stream_query(H2_Stream* stream) {
  return guarded("stream_query", [&] { return runtime().stream(stream)->query(); });
}

H2_Status stream_wait_event(H2_Stream* stream, H2_Event* event) {
  return guarded("stream_wait_event", [&] {
    auto target = runtime().stream(stream);
    std::shared_ptr<Marker> marker = runtime().event(event)->latest();
    // An event that has completed already orders nothing.
    if (marker && !marker->done()) target->enqueue_ordering([marker] { marker->wait(); });
  });
}

// Host pointers must not be device memory: that is a DEVICE_TO_DEVICE copy with the wrong kind, and
// in strict mode it would fault.
void check_host_pointer(const void* ptr, const char* role) {
  require(ptr, role);
  if (runtime().owner_of(ptr) != nullptr)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " is device memory but the copy kind says it is host memory");
}

H2_Status memset_async(H2_Stream* stream, void* dst, uint8_t value, size_t bytes) {
  return guarded("memset_async", [&] {
    auto target = runtime().stream(stream);
    void* shadow = resolve_device(dst, bytes, "destination");
    target->enqueue([shadow, value, bytes] {
      if (bytes > 0) std::memset(shadow, value, bytes);  // no pointer need be valid for 0 bytes
    });
  });
}

H2_Status memcpy_async(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
  return guarded("memcpy_async", [&] {
    auto target = runtime().stream(stream);
    void* to = nullptr;
    const void* from = nullptr;
    switch (h2::plugin::enum_bits(kind)) {
      case H2_MEMCPY_HOST_TO_DEVICE:
        check_host_pointer(src, "source");
        to = resolve_device(dst, bytes, "destination");
        from = src;
        break;
      case H2_MEMCPY_DEVICE_TO_HOST:
        check_host_pointer(dst, "destination");
        to = dst;
        from = resolve_device(src, bytes, "source");
        break;
      case H2_MEMCPY_DEVICE_TO_DEVICE:
        to = resolve_device(dst, bytes, "destination");
        from = resolve_device(src, bytes, "source");
        break;
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown copy kind " + std::to_string(h2::plugin::enum_bits(kind)));
    }
    const char* a = static_cast<const char*>(to);
    const char* b = static_cast<const char*>(from);
    if (bytes > 0 && a < b + bytes && b < a + bytes) fail(H2_STATUS_INVALID_ARGUMENT, "source and destination overlap");
    target->enqueue([to, from, bytes] {
      if (bytes > 0) std::memcpy(to, from, bytes);  // no pointer need be valid for 0 bytes
    });
  });
}

H2_Status event_create(int32_t device, uint32_t flags, H2_Event** event) {
  return guarded("event_create", [&] {
    require(event, "event");
    *event = runtime().create_event(device, flags);
  });
}

H2_Status event_destroy(H2_Event* event) {
  return guarded("event_destroy", [&] { runtime().destroy_event(event); });
}

H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  return guarded("event_record", [&] {
    auto target = runtime().stream(stream);
    runtime().event(event)->record(*target);
  });
}

H2_Status event_query(H2_Event* event) {
  return guarded("event_query", [&] {
    std::shared_ptr<Marker> marker = runtime().event(event)->latest();
    return !marker || marker->done() ? H2_STATUS_OK : H2_STATUS_NOT_READY;
  });
}

H2_Status event_synchronize(H2_Event* event) {
  return guarded("event_synchronize", [&] {
    if (std::shared_ptr<Marker> marker = runtime().event(event)->latest()) marker->wait();
  });
}

H2_Status event_elapsed_ms(H2_Event* start, H2_Event* end, float* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> H2_Status {
    require(milliseconds, "milliseconds");
    auto first = runtime().event(start);
    auto second = runtime().event(end);
    if (!first->timing() || !second->timing())
      fail(H2_STATUS_INVALID_ARGUMENT, "an event was created with H2_EVENT_DISABLE_TIMING");
    auto a = first->latest();
    auto b = second->latest();
    if (!a || !b) fail(H2_STATUS_INVALID_ARGUMENT, "an event has never been recorded");
    if (!a->done() || !b->done()) return H2_STATUS_NOT_READY;
    std::chrono::duration<double, std::milli> elapsed = b->completed_at() - a->completed_at();
    *milliseconds = static_cast<float>(elapsed.count());
    return H2_STATUS_OK;
  });
}

const H2_PluginApi kApi = {
    .struct_size = sizeof(H2_PluginApi),
    .abi_major = H2_ABI_MAJOR,
    .abi_minor = H2_ABI_MINOR,
    .plugin_name = H2_PLUGIN_NAME,
    .plugin_version = H2_VERSION,
    .initialize = initialize,
    .shutdown = shutdown,
    .last_error = get_last_error,
    .device_count = device_count,
    .device_properties = device_properties,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .mem_info = mem_info,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .stream_query = stream_query,
    .stream_wait_event = stream_wait_event,
    .memset_async = memset_async,
    .memcpy_async = memcpy_async,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed_ms = event_elapsed_ms,
    .op_table = &kOpTable,
    .stream_create_with_flags = stream_create_with_flags,
    .mem_export = mem_export,
    .mem_import = mem_import,
    .mem_close = mem_close,
    .mem_alloc_async = mem_alloc_async,
    .mem_free_async = mem_free_async,
    .option_list = option_list,
    .collective_table = &kCollectiveTable,
    .mem_export_dmabuf = mem_export_dmabuf,
};

}  // namespace
}  // namespace h2::cpu_reference

extern "C" H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api(uint32_t /*abi_major*/) {
  return &h2::cpu_reference::kApi;
}
