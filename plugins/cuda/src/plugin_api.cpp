// The CUDA plugin's C ABI table and its one exported entry point. Streams and events map one to one
// onto CUDA streams and events; each slot forwards to the Runtime and maps failures to a status
// plus the thread's last error.
#include <cuda_runtime.h>

#include <cstring>
#include <memory>

#include "collectives.hpp"
#include "cuda_error.hpp"
#include "dmabuf_export.hpp"
#include "h2/plugin_abi.h"
#include "ops/op_table.hpp"
#include "runtime.hpp"
#include "runtime_slots.hpp"

namespace h2::cuda {
namespace {

constexpr char kPluginName[] = "cuda";
// The slots that only forward to the Runtime (plugins/common/runtime_slots.hpp).
using Slots = h2::plugin::RuntimeSlots<Runtime, runtime_slot, kPluginName>;

H2_Status host_alloc(size_t bytes, void** ptr) {
  return guarded("host_alloc", [&] {
    require(ptr, "ptr");
    if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
    runtime();
    const cudaError_t status = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      fail(H2_STATUS_OUT_OF_MEMORY, "cannot pin " + std::to_string(bytes) + " bytes of host memory");
    }
    H2_CUDA_CHECK(status);
  });
}

H2_Status host_free(void* ptr) {
  return guarded("host_free", [&] {
    require(ptr, "ptr");
    Runtime& r = runtime();
    for (int d = 0; d < r.device_count(); ++d) {  // the ABI promises every stream's work is done
      use_device(d);
      H2_CUDA_CHECK(cudaDeviceSynchronize());
    }
    H2_CUDA_CHECK(cudaFreeHost(ptr));
  });
}

H2_Status stream_wait_event(H2_Stream* stream, H2_Event* event) {
  return guarded("stream_wait_event", [&] {
    auto s = runtime().stream(stream);
    auto e = runtime().event(event);
    if (!e->recorded) return;  // the ABI: waiting for a never-recorded event is a no-op
    use_device(s->device);
    H2_CUDA_CHECK(cudaStreamWaitEvent(s->stream, e->event, 0));
  });
}

// The device of a device pointer of this plugin, or -1 for host memory.
int device_of(const void* ptr) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

void check_device_pointer(const void* ptr, const char* role) {
  require(ptr, role);
  if (device_of(ptr) < 0) fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " is not device memory of this plugin");
}

void check_host_pointer(const void* ptr, const char* role) {
  require(ptr, role);
  if (device_of(ptr) >= 0)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " is device memory but the copy kind says it is host memory");
}

H2_Status memset_async(H2_Stream* stream, void* dst, uint8_t value, size_t bytes) {
  return guarded("memset_async", [&] {
    auto s = runtime().stream(stream);
    check_device_pointer(dst, "destination");
    use_device(s->device);
    H2_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, s->stream));
  });
}

H2_Status memcpy_async(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
  return guarded("memcpy_async", [&] {
    auto s = runtime().stream(stream);
    cudaMemcpyKind cuda_kind;
    switch (h2::plugin::enum_bits(kind)) {
      case H2_MEMCPY_HOST_TO_DEVICE:
        check_host_pointer(src, "source");
        check_device_pointer(dst, "destination");
        cuda_kind = cudaMemcpyHostToDevice;
        break;
      case H2_MEMCPY_DEVICE_TO_HOST:
        check_device_pointer(src, "source");
        check_host_pointer(dst, "destination");
        cuda_kind = cudaMemcpyDeviceToHost;
        break;
      case H2_MEMCPY_DEVICE_TO_DEVICE:
        check_device_pointer(src, "source");
        check_device_pointer(dst, "destination");
        cuda_kind = cudaMemcpyDeviceToDevice;
        break;
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown copy kind " + std::to_string(h2::plugin::enum_bits(kind)));
    }
    const char* a = static_cast<const char*>(dst);
    const char* b = static_cast<const char*>(src);
    if (bytes > 0 && a < b + bytes && b < a + bytes) fail(H2_STATUS_INVALID_ARGUMENT, "source and destination overlap");
    use_device(s->device);
    H2_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cuda_kind, s->stream));
  });
}

H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  return guarded("event_record", [&] {
    const auto [s, e] = Slots::event_on_stream(event, stream);
    use_device(s->device);
    H2_CUDA_CHECK(cudaEventRecord(e->event, s->stream));
    e->recorded = true;
  });
}

H2_Status event_query(H2_Event* event) {
  return guarded("event_query", [&]() -> H2_Status {
    auto e = runtime().event(event);
    const cudaError_t status = cudaEventQuery(e->event);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return H2_STATUS_NOT_READY;
    }
    H2_CUDA_CHECK(status);
    return H2_STATUS_OK;
  });
}

H2_Status event_synchronize(H2_Event* event) {
  return guarded("event_synchronize", [&] { H2_CUDA_CHECK(cudaEventSynchronize(runtime().event(event)->event)); });
}

H2_Status event_elapsed_ms(H2_Event* start, H2_Event* end, float* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> H2_Status {
    const auto [first, second] = Slots::timed_events(start, end, milliseconds);
    const cudaError_t status = cudaEventElapsedTime(milliseconds, first->event, second->event);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return H2_STATUS_NOT_READY;
    }
    H2_CUDA_CHECK(status);
    return H2_STATUS_OK;
  });
}

H2_Status mem_export_dmabuf(int32_t device, const void* ptr, uint64_t bytes, int32_t* fd, uint64_t* offset) {
  return guarded("mem_export_dmabuf", [&] {
    require(ptr, "ptr");
    require(fd, "fd");
    require(offset, "offset");
    uint64_t within = 0;
    *fd = export_dmabuf(device, ptr, static_cast<size_t>(bytes), within);
    *offset = within;
  });
}

const H2_PluginApi kApi = Slots::api_table(kPluginName, {
                                                            .stream_wait_event = stream_wait_event,
                                                            .memset_async = memset_async,
                                                            .memcpy_async = memcpy_async,
                                                            .event_record = event_record,
                                                            .event_query = event_query,
                                                            .event_synchronize = event_synchronize,
                                                            .event_elapsed_ms = event_elapsed_ms,
                                                            .op_table = &kOpTable,
                                                            .host_alloc = host_alloc,
                                                            .host_free = host_free,
                                                            .shares_memory = false,
                                                            .mem_export_dmabuf = mem_export_dmabuf,
                                                        });

}  // namespace
}  // namespace h2::cuda

// The collective section is offered only where NCCL loads, which is known at run time.
extern "C" H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api(uint32_t /*abi_major*/) {
  static const H2_PluginApi api = [] {
    H2_PluginApi with_nccl = h2::cuda::kApi;
    with_nccl.collective_table = h2::cuda::collective_table();
    return with_nccl;
  }();
  return &api;
}
