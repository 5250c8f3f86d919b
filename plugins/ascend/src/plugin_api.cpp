// The Ascend plugin's C ABI table and its one exported entry point. Streams and events map one to one
// onto aclrtStream and aclrtEvent; each slot checks what the ABI lets it check, forwards to the
// Runtime, and maps failures to a status plus the thread's last error.
#include <cstring>
#include <memory>

#include "acl_error.hpp"
#include "collectives.hpp"
#include "h2/plugin_abi.h"
#include "ops/device_copies.hpp"
#include "ops/op_table.hpp"
#include "runtime.hpp"
#include "runtime_slots.hpp"

namespace h2::ascend {
namespace {

constexpr char kPluginName[] = "ascend";
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
    H2_ACL(r.acl(), aclrtStreamWaitEvent, s->stream, e->event);
  });
}

H2_Status memset_async(H2_Stream* stream, void* dst, uint8_t value, size_t bytes) {
  return guarded("memset_async", [&] {
    Runtime& r = runtime();
    auto s = r.stream(stream);
    if (bytes == 0) return;
    Slots::check_device_range(dst, bytes, "destination");
    r.bind(s->device);
    H2_ACL(r.acl(), aclrtMemsetAsync, dst, bytes, value, bytes, s->stream);
  });
}

H2_Status memcpy_async(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
  return guarded("memcpy_async", [&] {
    Runtime& r = runtime();
    auto s = r.stream(stream);
    const uint32_t direction = Slots::checked_copy(dst, src, bytes, kind);
    if (bytes == 0) return;
    copy_async(*s, dst, src, bytes, direction);
  });
}

H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  return guarded("event_record", [&] {
    Runtime& r = runtime();
    const auto [s, e] = Slots::event_on_stream(event, stream);
    r.bind(s->device);
    H2_ACL(r.acl(), aclrtRecordEvent, e->event, s->stream);
    e->recorded = true;
  });
}

bool event_complete(Runtime& r, const Event& e) {
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  H2_ACL(r.acl(), aclrtQueryEventStatus, e.event, &status);
  return status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
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
    H2_ACL(r.acl(), aclrtSynchronizeEvent, r.event(event)->event);
  });
}

H2_Status event_elapsed_ms(H2_Event* start, H2_Event* end, float* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> H2_Status {
    Runtime& r = runtime();
    const auto [first, second] = Slots::timed_events(start, end, milliseconds);
    if (!event_complete(r, *first) || !event_complete(r, *second)) return H2_STATUS_NOT_READY;
    H2_ACL(r.acl(), aclrtEventElapsedTime, milliseconds, first->event, second->event);
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
}  // namespace h2::ascend

// The collective section is offered only where HCCL loads, which is known at run time.
extern "C" H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api(uint32_t /*abi_major*/) {
  static const H2_PluginApi api = [] {
    H2_PluginApi with_hccl = h2::ascend::kApi;
    with_hccl.collective_table = h2::ascend::collective_table();
    return with_hccl;
  }();
  return &api;
}
