// The AscendCL runtime functions the Ascend plugin uses, emulated on the CPU (libascendcl.so of the
// emulated CANN runtime). Each checks its arguments as strictly as CANN 8.0.0 documents and reports
// failures with the documented codes and an aclGetRecentErrMsg text.
#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "emulator.hpp"
#include "machine.hpp"

namespace ascend_emulator {
namespace {

thread_local std::string recent_error;
thread_local int32_t thread_device = -1;
constexpr auto kBlockingCallbackLimit = std::chrono::seconds(60);

std::string soc_name;  // what aclrtGetSocName returns; lives until the next aclInit

Stream& stream_of_current_device(const std::shared_ptr<Stream>& stream) {
  if (stream->device() != current_device())
    throw Error(ACL_ERROR_RT_STREAM_CONTEXT, "the stream belongs to device " + std::to_string(stream->device()) +
                                                 " but the thread's current device is " +
                                                 std::to_string(current_device()));
  return *stream;
}

void* checked_view(const void* ptr, size_t bytes, const char* role) {
  void* host = machine().view(ptr, bytes);
  if (!host)
    throw Error(ACL_ERROR_INVALID_PARAM, std::string(role) + " [" + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                                             ", +" + std::to_string(bytes) +
                                             ") is not inside one live device allocation");
  return host;
}

void check_host(const void* ptr, size_t bytes, const char* role) {
  if (ptr == nullptr) throw Error(ACL_ERROR_INVALID_PARAM, std::string(role) + " is NULL");
  if (machine().view(ptr, 1) != nullptr)
    throw Error(ACL_ERROR_INVALID_PARAM, std::string(role) + " is device memory but the copy kind says host memory");
  if (!machine().is_pinned(ptr, bytes))
    throw Error(ACL_ERROR_INVALID_PARAM,
                std::string(role) +
                    " of an asynchronous copy is not page-locked memory from aclrtMallocHost (CANN 8.0.0: such a "
                    "copy fails unpredictably when it runs)");
}

}  // namespace

void set_recent_error(const std::string& message) {
  recent_error = message;
}

aclError guarded(const char* call, const std::function<void()>& body) noexcept {
  try {
    body();
    return ACL_SUCCESS;
  } catch (const Error& e) {
    recent_error = std::string(call) + ": " + e.what();
    return e.code();
  } catch (const std::bad_alloc&) {
    recent_error = std::string(call) + ": host out of memory";
    return ACL_ERROR_BAD_ALLOC;
  } catch (const std::exception& e) {
    recent_error = std::string(call) + ": " + e.what();
    return ACL_ERROR_INTERNAL_ERROR;
  }
}

int32_t current_device() {
  if (thread_device < 0)
    throw Error(ACL_ERROR_RT_CONTEXT_NULL, "no current device on this thread (call aclrtSetDevice first)");
  return thread_device;
}

void* device_view(const void* device_ptr, size_t bytes) {
  return checked_view(device_ptr, bytes, "device memory");
}

bool is_device_memory(const void* ptr, size_t bytes) {
  return machine().view(ptr, bytes) != nullptr;
}

void launch(aclrtStream stream, const std::string& name, std::function<void()> kernel) {
  machine().check_alive();
  stream_of_current_device(machine().stream(stream)).enqueue(name, std::move(kernel));
}

}  // namespace ascend_emulator

using namespace ascend_emulator;

#define EXPORT extern "C" ASCEND_EMULATOR_EXPORT
// Each function has the signature acl_runtime.h declares for it (checked at the end of this file).

EXPORT const char* aclGetRecentErrMsg() {
  return recent_error.empty() ? nullptr : recent_error.c_str();
}

EXPORT aclError aclInit(const char* /*config_path*/) {
  return guarded("aclInit", [] {
    if (machine_slot()) throw Error(ACL_ERROR_REPEAT_INITIALIZE, "aclInit was already called in this process");
    Config config = read_config();
    soc_name = config.model + " (emulated)";
    machine_slot() = std::make_unique<Machine>(std::move(config));
  });
}

EXPORT aclError aclFinalize() {
  return guarded("aclFinalize", [] {
    machine();
    machine_slot().reset();
    thread_device = -1;
  });
}

EXPORT aclError aclrtGetDeviceCount(uint32_t* count) {
  return guarded("aclrtGetDeviceCount", [&] {
    if (!count) throw Error(ACL_ERROR_INVALID_PARAM, "count is NULL");
    if (machine().config().physical_devices == 0)
      throw Error(ACL_ERROR_RT_NO_DEVICE, "the driver finds no Ascend device (ASCEND_EMULATOR_DEVICES=0)");
    *count = static_cast<uint32_t>(machine().device_count());
  });
}

EXPORT aclError aclrtSetDevice(int32_t device) {
  return guarded("aclrtSetDevice", [&] {
    machine().check_device(device);
    machine().check_alive();
    machine().memory(device);
    thread_device = device;
  });
}

EXPORT aclError aclrtResetDevice(int32_t device) {
  return guarded("aclrtResetDevice", [&] {
    machine().check_device(device);
    if (thread_device == device) thread_device = -1;
  });
}

EXPORT aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  return guarded("aclrtCtxSetSysParamOpt", [&] {
    current_device();
    if (opt != ACL_OPT_DETERMINISTIC || value < 0 || value > 3)
      throw Error(ACL_ERROR_INVALID_PARAM, "only ACL_OPT_DETERMINISTIC 0..3 is emulated");
    // The emulated kernels always sum in a fixed order: the option changes nothing here.
  });
}

EXPORT const char* aclrtGetSocName() {
  const aclError status = guarded("aclrtGetSocName", [] { machine(); });
  return status == ACL_SUCCESS ? soc_name.c_str() : nullptr;
}

EXPORT aclError aclrtMalloc(void** dev_ptr, size_t size, aclrtMemMallocPolicy policy) {
  return guarded("aclrtMalloc", [&] {
    if (!dev_ptr) throw Error(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
    if (size == 0) throw Error(ACL_ERROR_INVALID_PARAM, "size is 0");
    if (policy != ACL_MEM_MALLOC_HUGE_FIRST && policy != ACL_MEM_MALLOC_HUGE_ONLY &&
        policy != ACL_MEM_MALLOC_NORMAL_ONLY)
      throw Error(ACL_ERROR_INVALID_PARAM, "unknown policy " + std::to_string(static_cast<int>(policy)));
    machine().check_alive();
    DeviceMemory& memory = machine().memory(current_device());
    void* ptr = machine().config().fail_malloc ? nullptr : memory.allocate(size);
    if (!ptr)
      throw Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory: " + std::to_string(size) +
                                                      " bytes requested, " + std::to_string(memory.free_bytes()) +
                                                      " of " + std::to_string(memory.total_bytes()) +
                                                      " free on device " + std::to_string(current_device()));
    *dev_ptr = ptr;
  });
}

EXPORT aclError aclrtFree(void* dev_ptr) {
  return guarded("aclrtFree", [&] {
    if (!dev_ptr) throw Error(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
    if (machine().exported(dev_ptr))
      throw Error(ACL_ERROR_INVALID_PARAM, "the memory is still exported: close its IPC key (aclrtIpcMemClose) first");
    for (int32_t d = 0; d < machine().device_count(); ++d) {
      if (machine().memory(d).view(dev_ptr, 1) != nullptr) {
        machine().memory(d).release(dev_ptr);
        return;
      }
    }
    throw Error(ACL_ERROR_INVALID_PARAM, "the pointer is not device memory of any device (freed twice?)");
  });
}

EXPORT aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free_bytes, size_t* total_bytes) {
  return guarded("aclrtGetMemInfo", [&] {
    if (!free_bytes || !total_bytes) throw Error(ACL_ERROR_INVALID_PARAM, "free or total is NULL");
    if (attr != ACL_HBM_MEM) throw Error(ACL_ERROR_INVALID_PARAM, "only ACL_HBM_MEM is emulated");
    DeviceMemory& memory = machine().memory(current_device());
    *free_bytes = memory.free_bytes();
    *total_bytes = memory.total_bytes();
  });
}

EXPORT aclError aclrtMallocHost(void** host_ptr, size_t size) {
  return guarded("aclrtMallocHost", [&] {
    if (!host_ptr) throw Error(ACL_ERROR_INVALID_PARAM, "hostPtr is NULL");
    if (size == 0) throw Error(ACL_ERROR_INVALID_PARAM, "size is 0");
    void* ptr = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!ptr) throw Error(ACL_ERROR_BAD_ALLOC, "cannot allocate " + std::to_string(size) + " bytes of host memory");
    machine().add_pinned(ptr, size);
    *host_ptr = ptr;
  });
}

EXPORT aclError aclrtFreeHost(void* host_ptr) {
  return guarded("aclrtFreeHost", [&] {
    if (!machine().remove_pinned(host_ptr))
      throw Error(ACL_ERROR_INVALID_PARAM, "the pointer is not from aclrtMallocHost");
    std::free(host_ptr);
  });
}

EXPORT aclError aclrtCreateStream(aclrtStream* stream) {
  return guarded("aclrtCreateStream", [&] {
    if (!stream) throw Error(ACL_ERROR_INVALID_PARAM, "stream is NULL");
    machine().check_alive();
    *stream = machine().add_stream(current_device());
  });
}

EXPORT aclError aclrtDestroyStream(aclrtStream stream) {
  return guarded("aclrtDestroyStream", [&] {
    auto found = machine().stream(stream);
    if (!found->idle())
      throw Error(ACL_ERROR_RT_STREAM_NOT_COMPLETE,
                  "the stream still has unfinished tasks (CANN 8.0.0: synchronize a stream before destroying it)");
    machine().take_stream(stream);
  });
}

EXPORT aclError aclrtSynchronizeStream(aclrtStream stream) {
  return guarded("aclrtSynchronizeStream", [&] { machine().stream(stream)->synchronize(); });
}

EXPORT aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  return guarded("aclrtStreamQuery", [&] {
    if (!status) throw Error(ACL_ERROR_INVALID_PARAM, "status is NULL");
    *status = machine().stream(stream)->idle() ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
  });
}

EXPORT aclError aclrtMemcpyAsync(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind,
                                 aclrtStream stream) {
  return guarded("aclrtMemcpyAsync", [&] {
    Stream& queue = stream_of_current_device(machine().stream(stream));
    machine().check_alive();
    if (count > dest_max) throw Error(ACL_ERROR_INVALID_PARAM, "count is larger than destMax");
    if (reinterpret_cast<uintptr_t>(dst) % 64 != 0 || reinterpret_cast<uintptr_t>(src) % 64 != 0)
      throw Error(ACL_ERROR_RT_ADDR_UNALIGNED,
                  "the source and destination must be 64-byte aligned (CANN 8.0.0, aclrtMemcpyAsync, all models)");
    switch (kind) {
      case ACL_MEMCPY_HOST_TO_HOST:
        throw Error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "asynchronous host-to-host copies are not supported");
      case ACL_MEMCPY_HOST_TO_DEVICE:
        check_host(src, count, "src");
        checked_view(dst, count, "dst");
        break;
      case ACL_MEMCPY_DEVICE_TO_HOST:
        checked_view(src, count, "src");
        check_host(dst, count, "dst");
        break;
      case ACL_MEMCPY_DEVICE_TO_DEVICE:
        checked_view(src, count, "src");
        checked_view(dst, count, "dst");
        break;
      default: throw Error(ACL_ERROR_INVALID_PARAM, "unknown copy kind " + std::to_string(static_cast<int>(kind)));
    }
    queue.enqueue("aclrtMemcpyAsync", [dst, src, count, kind] {
      void* to = kind == ACL_MEMCPY_DEVICE_TO_HOST ? dst : device_view(dst, count);
      const void* from = kind == ACL_MEMCPY_HOST_TO_DEVICE ? src : device_view(src, count);
      std::memmove(to, from, count);
    });
  });
}

EXPORT aclError aclrtMemsetAsync(void* dev_ptr, size_t max_count, int32_t value, size_t count, aclrtStream stream) {
  return guarded("aclrtMemsetAsync", [&] {
    Stream& queue = stream_of_current_device(machine().stream(stream));
    machine().check_alive();
    if (count > max_count) throw Error(ACL_ERROR_INVALID_PARAM, "count is larger than maxCount");
    checked_view(dev_ptr, count, "devPtr");
    queue.enqueue("aclrtMemsetAsync",
                  [dev_ptr, value, count] { std::memset(device_view(dev_ptr, count), value, count); });
  });
}

EXPORT aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  return guarded("aclrtCreateEventWithFlag", [&] {
    if (!event) throw Error(ACL_ERROR_INVALID_PARAM, "event is NULL");
    if ((flag & ~(ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE)) != 0)
      throw Error(ACL_ERROR_INVALID_PARAM, "flag " + std::to_string(flag) + " has bits that are not emulated");
    *event = machine().add_event(current_device(), flag);
  });
}

EXPORT aclError aclrtDestroyEvent(aclrtEvent event) {
  return guarded("aclrtDestroyEvent", [&] { machine().remove_event(event); });
}

EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return guarded("aclrtRecordEvent", [&] {
    auto state = machine().event(event);
    Stream& queue = stream_of_current_device(machine().stream(stream));
    if (state->device() != queue.device())
      throw Error(ACL_ERROR_RT_STREAM_CONTEXT, "the event and the stream belong to different devices");
    state->place(queue, "aclrtRecordEvent");
  });
}

EXPORT aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  return guarded("aclrtQueryEventStatus", [&] {
    if (!status) throw Error(ACL_ERROR_INVALID_PARAM, "status is NULL");
    *status =
        machine().event(event)->complete() ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  });
}

EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return guarded("aclrtSynchronizeEvent", [&] { machine().event(event)->wait(); });
}

EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return guarded("aclrtStreamWaitEvent", [&] {
    auto state = machine().event(event);
    state->enqueue_wait(stream_of_current_device(machine().stream(stream)), "aclrtStreamWaitEvent");
  });
}

EXPORT aclError aclrtEventElapsedTime(float* milliseconds, aclrtEvent start, aclrtEvent end) {
  return guarded("aclrtEventElapsedTime", [&] {
    if (!milliseconds) throw Error(ACL_ERROR_INVALID_PARAM, "ms is NULL");
    std::chrono::steady_clock::time_point times[2];
    int i = 0;
    for (aclrtEvent handle : {start, end}) {
      auto state = machine().event(handle);
      if (!state->timing()) throw Error(ACL_ERROR_RT_PARAM_INVALID, "an event was created without ACL_EVENT_TIME_LINE");
      switch (state->state(&times[i++])) {
        case Event::State::never_placed: throw Error(ACL_ERROR_RT_PARAM_INVALID, "an event has never been recorded");
        case Event::State::pending: throw Error(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "an event has not completed yet");
        case Event::State::done: break;
      }
    }
    *milliseconds = std::chrono::duration<float, std::milli>(times[1] - times[0]).count();
  });
}

EXPORT aclError aclrtIpcMemGetExportKey(void* dev_ptr, size_t size, char* key, size_t len, uint64_t flags) {
  return guarded("aclrtIpcMemGetExportKey", [&] {
    if (!dev_ptr || !key) throw Error(ACL_ERROR_INVALID_PARAM, "devPtr or key is NULL");
    if (len != ACL_RT_IPC_MEM_KEY_LENGTH) throw Error(ACL_ERROR_INVALID_PARAM, "len must be 65");
    if (flags > ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
      throw Error(ACL_ERROR_INVALID_PARAM, "unknown flags");
    const std::string made = machine().export_key(dev_ptr, size, flags);
    std::snprintf(key, len, "%s", made.c_str());
  });
}

EXPORT aclError aclrtIpcMemImportByKey(void** dev_ptr, const char* key, uint64_t flags) {
  return guarded("aclrtIpcMemImportByKey", [&] {
    if (!dev_ptr || !key) throw Error(ACL_ERROR_INVALID_PARAM, "devPtr or key is NULL");
    if (flags > 1) throw Error(ACL_ERROR_INVALID_PARAM, "unknown flags");
    current_device();
    *dev_ptr = machine().import_key(key);
  });
}

EXPORT aclError aclrtIpcMemClose(const char* key) {
  return guarded("aclrtIpcMemClose", [&] {
    if (!key) throw Error(ACL_ERROR_INVALID_PARAM, "key is NULL");
    machine().close_key(key);
  });
}

EXPORT aclError aclrtSubscribeReport(uint64_t thread_id, aclrtStream stream) {
  return guarded("aclrtSubscribeReport", [&] {
    auto found = machine().stream(stream);
    if (found->subscriber()) throw Error(ACL_ERROR_RT_STREAM_SUBSCRIBE, "the stream already has a callback thread");
    machine().report_queue(thread_id);
    found->set_subscriber(thread_id);
  });
}

EXPORT aclError aclrtUnSubscribeReport(uint64_t thread_id, aclrtStream stream) {
  return guarded("aclrtUnSubscribeReport", [&] {
    auto found = machine().stream(stream);
    if (found->subscriber() != thread_id)
      throw Error(ACL_ERROR_RT_STREAM_SUBSCRIBE, "the thread is not subscribed to the stream");
    found->set_subscriber(std::nullopt);
  });
}

EXPORT aclError aclrtLaunchCallback(aclrtCallback fn, void* user_data, aclrtCallbackBlockType block,
                                    aclrtStream stream) {
  return guarded("aclrtLaunchCallback", [&] {
    if (!fn) throw Error(ACL_ERROR_INVALID_PARAM, "fn is NULL");
    if (block != ACL_CALLBACK_BLOCK && block != ACL_CALLBACK_NO_BLOCK)
      throw Error(ACL_ERROR_INVALID_PARAM, "invalid block type");
    Stream& queue = stream_of_current_device(machine().stream(stream));
    const auto subscriber = queue.subscriber();
    if (!subscriber)
      throw Error(ACL_ERROR_RT_STREAM_NO_CB_REG, "no thread is subscribed to the stream (aclrtSubscribeReport)");
    ReportQueue* reports = &machine().report_queue(*subscriber);
    const bool blocking = block == ACL_CALLBACK_BLOCK;
    queue.enqueue(
        "aclrtLaunchCallback",
        [reports, fn, user_data, blocking] {
          auto done = std::make_shared<std::atomic<bool>>(false);
          std::unique_lock lock(reports->mutex);
          reports->calls.push_back({fn, user_data, done});
          reports->changed.notify_all();
          if (!blocking) return;
          if (!reports->changed.wait_for(lock, kBlockingCallbackLimit, [&] { return done->load(); }))
            throw Error(ACL_ERROR_RT_REPORT_TIMEOUT,
                        "a blocking callback did not run within 60 s (is a thread calling aclrtProcessReport?)");
        },
        false);
  });
}

EXPORT aclError aclrtProcessReport(int32_t timeout_ms) {
  return guarded("aclrtProcessReport", [&] {
    ReportQueue& reports = machine().report_queue(static_cast<uint64_t>(pthread_self()));
    std::unique_lock lock(reports.mutex);
    const auto due = [&] { return !reports.calls.empty(); };
    if (timeout_ms < 0)
      reports.changed.wait(lock, due);
    else if (!reports.changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), due))
      throw Error(ACL_ERROR_RT_REPORT_TIMEOUT, "no callback within the timeout");
    ReportQueue::Call call = reports.calls.front();
    reports.calls.pop_front();
    lock.unlock();
    call.fn(call.user_data);
    lock.lock();
    call.done->store(true);
    reports.changed.notify_all();
  });
}

// Every emulated function has exactly the signature the plugin's header declares.
#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(aclGetRecentErrMsg);
H2_CHECK_SIGNATURE(aclInit);
H2_CHECK_SIGNATURE(aclFinalize);
H2_CHECK_SIGNATURE(aclrtGetDeviceCount);
H2_CHECK_SIGNATURE(aclrtSetDevice);
H2_CHECK_SIGNATURE(aclrtResetDevice);
H2_CHECK_SIGNATURE(aclrtGetSocName);
H2_CHECK_SIGNATURE(aclrtCtxSetSysParamOpt);
H2_CHECK_SIGNATURE(aclrtMalloc);
H2_CHECK_SIGNATURE(aclrtFree);
H2_CHECK_SIGNATURE(aclrtGetMemInfo);
H2_CHECK_SIGNATURE(aclrtMallocHost);
H2_CHECK_SIGNATURE(aclrtFreeHost);
H2_CHECK_SIGNATURE(aclrtCreateStream);
H2_CHECK_SIGNATURE(aclrtDestroyStream);
H2_CHECK_SIGNATURE(aclrtSynchronizeStream);
H2_CHECK_SIGNATURE(aclrtStreamQuery);
H2_CHECK_SIGNATURE(aclrtMemcpyAsync);
H2_CHECK_SIGNATURE(aclrtMemsetAsync);
H2_CHECK_SIGNATURE(aclrtCreateEventWithFlag);
H2_CHECK_SIGNATURE(aclrtDestroyEvent);
H2_CHECK_SIGNATURE(aclrtRecordEvent);
H2_CHECK_SIGNATURE(aclrtQueryEventStatus);
H2_CHECK_SIGNATURE(aclrtSynchronizeEvent);
H2_CHECK_SIGNATURE(aclrtStreamWaitEvent);
H2_CHECK_SIGNATURE(aclrtEventElapsedTime);
H2_CHECK_SIGNATURE(aclrtSubscribeReport);
H2_CHECK_SIGNATURE(aclrtUnSubscribeReport);
H2_CHECK_SIGNATURE(aclrtLaunchCallback);
H2_CHECK_SIGNATURE(aclrtProcessReport);
H2_CHECK_SIGNATURE(aclrtIpcMemGetExportKey);
H2_CHECK_SIGNATURE(aclrtIpcMemImportByKey);
H2_CHECK_SIGNATURE(aclrtIpcMemClose);
