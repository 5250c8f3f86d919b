// The MLU plugin's C ABI table and its one exported entry point. Streams map one to one onto CNRT
// queues (each with its CNNL handle) and events onto notifiers; each slot checks what the ABI lets it
// check, forwards to the Runtime, and maps failures to a status plus the thread's last error.
#include "collectives.hpp"
#include "h2/plugin_abi.h"
#include "mlu_error.hpp"
#include "ops/op_table.hpp"
#include "runtime.hpp"
#include "runtime_slots.hpp"

namespace h2::mlu {
namespace {

constexpr char kPluginName[] = "mlu";
// The slots that only forward to the Runtime (plugins/common/runtime_slots.hpp).
using Slots = h2::plugin::RuntimeSlots<Runtime, runtime_slot, kPluginName>;

using h2::plugin::fail;
using h2::plugin::guarded;
using h2::plugin::require;

H2_Status stream_wait_event(H2_Stream* stream, H2_Event* event) {
  return guarded("stream_wait_event", [&] {
    Runtime& r = runtime();
    auto s = r.stream(stream);
    auto e = r.event(event);
    if (!e->recorded) return;  // the ABI: waiting for a never-recorded event is a no-op
    r.bind(s->device);
    H2_CNRT(r.cnrt(), cnrtQueueWaitNotifier, e->notifier, s->queue, 0);
  });
}

H2_Status memset_async(H2_Stream* stream, void* dst, uint8_t value, size_t bytes) {
  return guarded("memset_async", [&] {
    Runtime& r = runtime();
    auto s = r.stream(stream);
    if (bytes == 0) return;
    Slots::check_device_range(dst, bytes, "destination");
    r.bind(s->device);
    H2_CNRT(r.cnrt(), cnrtMemsetAsync, dst, value, bytes, s->queue);
  });
}

// Host memory from this plugin's host_alloc is copied by CNRT directly; other host memory through
// page-locked staging (cnrt_staging.hpp). CNRT has no alignment rule for copies.
H2_Status memcpy_async(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
  return guarded("memcpy_async", [&] {
    Runtime& r = runtime();
    auto s = r.stream(stream);
    const uint32_t direction = Slots::checked_copy(dst, src, bytes, kind);
    if (bytes == 0) return;
    r.bind(s->device);
    switch (direction) {
      case H2_MEMCPY_HOST_TO_DEVICE:
        if (!r.is_host_allocation(src, bytes)) return r.staging().to_device(s->queue, dst, src, bytes);
        return H2_CNRT(r.cnrt(), cnrtMemcpyAsync_V2, dst, const_cast<void*>(src), bytes, s->queue, cnrtMemcpyHostToDev);
      case H2_MEMCPY_DEVICE_TO_HOST:
        if (!r.is_host_allocation(dst, bytes)) return r.staging().to_host(s->queue, dst, src, bytes);
        return H2_CNRT(r.cnrt(), cnrtMemcpyAsync_V2, dst, const_cast<void*>(src), bytes, s->queue, cnrtMemcpyDevToHost);
      default: H2_CNRT(r.cnrt(), cnrtMemcpyAsync_V2, dst, const_cast<void*>(src), bytes, s->queue, cnrtMemcpyDevToDev);
    }
  });
}

H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  return guarded("event_record", [&] {
    Runtime& r = runtime();
    const auto [s, e] = Slots::event_on_stream(event, stream);
    r.bind(s->device);
    H2_CNRT(r.cnrt(), cnrtPlaceNotifier, e->notifier, s->queue);
    e->recorded = true;
  });
}

bool event_complete(Runtime& r, const Event& e) {
  const cnrtRet_t code = r.cnrt().cnrtQueryNotifier(e.notifier);
  if (not_ready(code)) {
    r.cnrt().cnrtGetLastError();
    return false;
  }
  cnrt_check(r.cnrt(), code, "cnrtQueryNotifier");
  return true;
}

H2_Status event_query(H2_Event* event) {
  return guarded("event_query", [&]() -> H2_Status {
    Runtime& r = runtime();
    return event_complete(r, *r.event(event)) ? H2_STATUS_OK : H2_STATUS_NOT_READY;
  });
}

H2_Status event_synchronize(H2_Event* event) {
  return guarded("event_synchronize", [&] {
    Runtime& r = runtime();
    H2_CNRT(r.cnrt(), cnrtWaitNotifier, r.event(event)->notifier);
  });
}

H2_Status event_elapsed_ms(H2_Event* start, H2_Event* end, float* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> H2_Status {
    Runtime& r = runtime();
    const auto [first, second] = Slots::timed_events(start, end, milliseconds);
    if (!event_complete(r, *first) || !event_complete(r, *second)) return H2_STATUS_NOT_READY;
    H2_CNRT(r.cnrt(), cnrtNotifierElapsedTime, first->notifier, second->notifier, milliseconds);
    return H2_STATUS_OK;
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
                                                        });

}  // namespace
}  // namespace h2::mlu

// The collective section is offered only where CNCL loads, which is known at run time.
extern "C" H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api(uint32_t /*abi_major*/) {
  static const H2_PluginApi api = [] {
    H2_PluginApi with_cncl = h2::mlu::kApi;
    with_cncl.collective_table = h2::mlu::collective_table();
    return with_cncl;
  }();
  return &api;
}
