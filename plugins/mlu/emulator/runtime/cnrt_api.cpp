// The CNRT functions the MLU plugin uses, emulated on the CPU (libcnrt.so of the emulated Neuware
// runtime). Each checks its arguments as strictly as CNRT 6 documents and returns the documented
// codes. CNRT has only a static text per code (cnrtGetErrorStr); the emulator appends what went wrong
// in the calling thread's last failed call, so a test's message says more than the code.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "mlu_emulator.hpp"
#include "mlu_machine.hpp"

namespace mlu_emulator {
namespace {

thread_local int32_t thread_device = 0;  // CNRT: device 0 until cnrtSetDevice
thread_local cnrtRet_t last_error = cnrtSuccess;
thread_local std::string last_detail;
thread_local std::string error_text;  // what cnrtGetErrorStr returned last on this thread

cnrtRet_t guarded(const char* call, const std::function<void()>& body) noexcept {
  cnrtRet_t code = cnrtSuccess;
  try {
    body();
    return cnrtSuccess;
  } catch (const Error& e) {
    code = static_cast<cnrtRet_t>(e.code());
    last_detail = std::string(call) + ": " + e.what();
  } catch (const std::bad_alloc&) {
    code = cnrtErrorSysNoMem;
    last_detail = std::string(call) + ": host out of memory";
  } catch (const std::exception& e) {
    code = cnrtErrorUnknown;
    last_detail = std::string(call) + ": " + e.what();
  }
  last_error = code;
  return code;
}

Queue& queue_of_current_device(cnrtQueue_t handle) {
  Queue& queue = machine().queue_of(handle);
  if (queue.device() != current_device())
    throw Error(cnrtErrorIllegalState, "the queue belongs to device " + std::to_string(queue.device()) +
                                           " but the thread's current device is " + std::to_string(current_device()));
  return queue;
}

void check_pinned(const void* ptr, size_t bytes, const char* role) {
  if (ptr == nullptr) throw Error(cnrtErrorArgsInvalid, std::string(role) + " is NULL");
  if (machine().view(ptr, 1) != nullptr)
    throw Error(cnrtErrorArgsInvalid, std::string(role) + " is device memory but the direction says host memory");
  if (!machine().is_pinned(ptr, bytes))
    throw Error(cnrtErrorArgsInvalid,
                std::string(role) + " of an asynchronous copy is not page-locked memory from cnrtHostMalloc");
}

const char* static_text(cnrtRet_t code) {
  switch (code) {
    case cnrtSuccess: return "success";
    case cnrtErrorNotReady: return "work is not yet complete";
    case cnrtErrorInit: return "initialization failed";
    case cnrtErrorNoDevice: return "no MLU device is available";
    case cnrtErrorDeviceInvalid: return "invalid device ordinal";
    case cnrtErrorArgsInvalid: return "invalid argument";
    case cnrtErrorSys: return "a system call failed";
    case cnrtErrorSysNoMem: return "host out of memory";
    case cnrtErrorInvalidResourceHandle: return "invalid resource handle";
    case cnrtErrorIllegalState: return "illegal state";
    case cnrtErrorNotSupport: return "not supported";
    case cnrtErrorOpsNotPermitted: return "operation not permitted";
    case cnrtErrorNoMem: return "device out of memory";
    case cnrtErrorBusy: return "device busy";
    case cnrtErrorQueue: return "a task on the queue failed";
    case cnrtErrorDevice: return "the device failed";
    case cnrtErrorKernelTrap: return "a kernel trapped on the device";
    case cnrtErrorCndrvFuncCall: return "a driver call failed";
    default: return "unknown error";
  }
}

// A cnrtIpcMemHandle is pointer-sized: the emulator packs the exporter's pid (22 bits), its memory
// file (12 bits) and the allocation's offset in 128-byte units (30 bits) into it.
cnrtIpcMemHandle pack_handle(unsigned long long pid, unsigned long long file, size_t offset) {
  if (pid >= (1ull << 22) || file >= (1ull << 12) || offset % 128 != 0 || offset / 128 >= (1ull << 30))
    throw Error(cnrtErrorSys, "the allocation cannot be described by a pointer-sized handle");
  const uint64_t packed = (pid << 42) | (file << 30) | (offset / 128);
  return reinterpret_cast<cnrtIpcMemHandle>(static_cast<uintptr_t>(packed));
}

std::string key_of(cnrtIpcMemHandle handle) {
  const uint64_t packed = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  // Size 0: the importer maps from the offset to the end of the exporter's memory (CNRT maps the
  // whole allocation; its size is the exporter's to tell).
  return "h2emu:" + std::to_string(packed >> 42) + ":" + std::to_string((packed >> 30) & 0xfff) + ":" +
         std::to_string((packed & ((1ull << 30) - 1)) * 128) + ":0:mlu";
}

}  // namespace

int32_t current_device() {
  machine().check_device(thread_device);
  return thread_device;
}

void* device_view(const void* device_ptr, size_t bytes) {
  return machine().checked_view(device_ptr, bytes, "device memory");
}

bool is_device_memory(const void* ptr, size_t bytes) {
  return machine().view(ptr, bytes) != nullptr;
}

int32_t queue_device(cnrtQueue_t queue) {
  return machine().queue_of(queue).device();
}

void launch(cnrtQueue_t queue, const std::string& name, std::function<void()> kernel) {
  machine().check_alive();
  queue_of_current_device(queue).enqueue(name, std::move(kernel));
}

}  // namespace mlu_emulator

using namespace mlu_emulator;

#define EXPORT extern "C" MLU_EMULATOR_EXPORT
// Each function has the signature cnrt.h declares for it (checked at the end of this file).

EXPORT const char* cnrtGetErrorStr(cnrtRet_t code) {
  error_text = static_text(code);
  if (code != cnrtSuccess && code == last_error && !last_detail.empty())
    error_text += " (emulated MLU: " + last_detail + ")";
  return error_text.c_str();
}

EXPORT cnrtRet_t cnrtGetLastError() {
  const cnrtRet_t code = last_error;
  last_error = cnrtSuccess;
  return code;
}

EXPORT cnrtRet_t cnrtGetDeviceCount(unsigned int* count) {
  return guarded("cnrtGetDeviceCount", [&] {
    if (!count) throw Error(cnrtErrorArgsInvalid, "count is NULL");
    if (machine().config().physical_devices == 0)
      throw Error(cnrtErrorNoDevice, "the driver finds no MLU device (MLU_EMULATOR_DEVICES=0)");
    *count = static_cast<unsigned int>(machine().device_count());
  });
}

EXPORT cnrtRet_t cnrtSetDevice(int device) {
  return guarded("cnrtSetDevice", [&] {
    machine().check_device(device);
    machine().check_alive();
    machine().memory(device);
    thread_device = device;
  });
}

EXPORT cnrtRet_t cnrtGetDevice(int* device) {
  return guarded("cnrtGetDevice", [&] {
    if (!device) throw Error(cnrtErrorArgsInvalid, "device is NULL");
    *device = current_device();
  });
}

EXPORT cnrtRet_t cnrtSyncDevice() {
  return guarded("cnrtSyncDevice", [&] {
    machine().check_alive();
    for (const auto& queue : machine().queues_of(current_device())) queue->synchronize();
  });
}

EXPORT cnrtRet_t cnrtGetDeviceProperties(cnrtDeviceProp_t* prop, int device) {
  return guarded("cnrtGetDeviceProperties", [&] {
    if (!prop) throw Error(cnrtErrorArgsInvalid, "prop is NULL");
    machine().check_device(device);
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "%s (emulated)", machine().config().model.c_str());
  });
}

EXPORT cnrtRet_t cnrtDeviceGetAttribute(int* value, cnrtDeviceAttr_t attr, int device) {
  return guarded("cnrtDeviceGetAttribute", [&] {
    if (!value) throw Error(cnrtErrorArgsInvalid, "value is NULL");
    machine().check_device(device);
    // An MLU370-X8 chip's layout and clocks as Cambricon publishes them; the emulator's memory size.
    switch (attr) {
      case cnrtAttrClusterCount: *value = 8; break;
      case cnrtAttrMcorePerCluster: *value = 4; break;
      case cnrtAttrIpuClockRate: *value = 1300000; break;
      case cnrtAttrMemClockRate: *value = 3200000; break;
      case cnrtAttrGmemBusWidth: *value = 384; break;
      case cnrtAttrTotalMemSize: *value = static_cast<int>(machine().config().memory_bytes >> 20); break;
      default: throw Error(cnrtErrorArgsInvalid, "attribute " + std::to_string(attr) + " is not emulated");
    }
  });
}

EXPORT cnrtRet_t cnrtMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return guarded("cnrtMemGetInfo", [&] {
    if (!free_bytes || !total_bytes) throw Error(cnrtErrorArgsInvalid, "free or total is NULL");
    DeviceMemory& memory = machine().memory(current_device());
    *free_bytes = memory.free_bytes();
    *total_bytes = memory.total_bytes();
  });
}

EXPORT cnrtRet_t cnrtMalloc(void** ptr, size_t bytes) {
  return guarded("cnrtMalloc", [&] {
    if (!ptr) throw Error(cnrtErrorArgsInvalid, "ptr is NULL");
    if (bytes == 0) throw Error(cnrtErrorArgsInvalid, "bytes is 0");
    machine().check_alive();
    DeviceMemory& memory = machine().memory(current_device());
    void* block = machine().config().fail_malloc ? nullptr : memory.allocate(bytes);
    if (!block)
      throw Error(cnrtErrorNoMem, "out of device memory: " + std::to_string(bytes) + " bytes requested, " +
                                      std::to_string(memory.free_bytes()) + " of " +
                                      std::to_string(memory.total_bytes()) + " free on device " +
                                      std::to_string(current_device()));
    *ptr = block;
  });
}

EXPORT cnrtRet_t cnrtFree(void* ptr) {
  return guarded("cnrtFree", [&] {
    if (!ptr) throw Error(cnrtErrorArgsInvalid, "ptr is NULL");
    for (int32_t d = 0; d < machine().device_count(); ++d) {
      DeviceMemory& memory = machine().memory(d);
      const auto [start, bytes] = memory.allocation_of(ptr);
      if (start == nullptr) continue;
      if (start != ptr) throw Error(cnrtErrorArgsInvalid, "the pointer is inside an allocation, not its start");
      machine().close_exports_within(start, bytes);
      memory.release(ptr);
      return;
    }
    throw Error(cnrtErrorArgsInvalid, "the pointer is not device memory of any device (freed twice?)");
  });
}

EXPORT cnrtRet_t cnrtHostMalloc(void** ptr, size_t bytes) {
  return guarded("cnrtHostMalloc", [&] {
    if (!ptr) throw Error(cnrtErrorArgsInvalid, "ptr is NULL");
    if (bytes == 0) throw Error(cnrtErrorArgsInvalid, "bytes is 0");
    void* block = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!block) throw Error(cnrtErrorSysNoMem, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    machine().add_pinned(block, bytes);
    *ptr = block;
  });
}

EXPORT cnrtRet_t cnrtFreeHost(void* ptr) {
  return guarded("cnrtFreeHost", [&] {
    if (!machine().remove_pinned(ptr)) throw Error(cnrtErrorArgsInvalid, "the pointer is not from cnrtHostMalloc");
    std::free(ptr);
  });
}

EXPORT cnrtRet_t cnrtQueueCreate(cnrtQueue_t* queue) {
  return guarded("cnrtQueueCreate", [&] {
    if (!queue) throw Error(cnrtErrorArgsInvalid, "queue is NULL");
    machine().check_alive();
    *queue = static_cast<cnrtQueue_t>(machine().add_queue(current_device()));
  });
}

EXPORT cnrtRet_t cnrtQueueDestroy(cnrtQueue_t queue) {
  // The queue's worker finishes what is queued before it stops.
  return guarded("cnrtQueueDestroy", [&] { machine().take_queue(queue); });
}

EXPORT cnrtRet_t cnrtQueueSync(cnrtQueue_t queue) {
  return guarded("cnrtQueueSync", [&] { machine().queue_of(queue).synchronize(); });
}

EXPORT cnrtRet_t cnrtQueueQuery(cnrtQueue_t queue) {
  return guarded("cnrtQueueQuery", [&] {
    Queue& found = machine().queue_of(queue);
    if (!found.idle()) throw Error(cnrtErrorNotReady, "the queue still has work");
    found.synchronize();  // drained: reports a failed task's error
  });
}

EXPORT cnrtRet_t cnrtMemcpyAsync_V2(void* dst, void* src, size_t bytes, cnrtQueue_t queue, cnrtMemTransDir_t dir) {
  return guarded("cnrtMemcpyAsync_V2", [&] {
    Queue& target = queue_of_current_device(queue);
    machine().check_alive();
    if (bytes == 0) return;
    switch (dir) {
      case cnrtMemcpyHostToDev:
        check_pinned(src, bytes, "src");
        machine().checked_view(dst, bytes, "dst");
        break;
      case cnrtMemcpyDevToHost:
        machine().checked_view(src, bytes, "src");
        check_pinned(dst, bytes, "dst");
        break;
      case cnrtMemcpyDevToDev:
      case cnrtMemcpyPeerToPeer:
        machine().checked_view(src, bytes, "src");
        machine().checked_view(dst, bytes, "dst");
        break;
      default:
        throw Error(cnrtErrorArgsInvalid, "direction " + std::to_string(static_cast<int>(dir)) +
                                              " is not supported by the asynchronous copy");
    }
    target.enqueue("cnrtMemcpyAsync_V2", [dst, src, bytes, dir] {
      void* to = dir == cnrtMemcpyDevToHost ? dst : device_view(dst, bytes);
      const void* from = dir == cnrtMemcpyHostToDev ? src : device_view(src, bytes);
      std::memmove(to, from, bytes);
    });
  });
}

EXPORT cnrtRet_t cnrtMemsetAsync(void* ptr, int value, size_t bytes, cnrtQueue_t queue) {
  return guarded("cnrtMemsetAsync", [&] {
    Queue& target = queue_of_current_device(queue);
    machine().check_alive();
    machine().checked_view(ptr, bytes, "ptr");
    target.enqueue("cnrtMemsetAsync", [ptr, value, bytes] { std::memset(device_view(ptr, bytes), value, bytes); });
  });
}

EXPORT cnrtRet_t cnrtInvokeHostFunc(cnrtQueue_t queue, cnrtHostFn_t fn, void* args) {
  return guarded("cnrtInvokeHostFunc", [&] {
    if (!fn) throw Error(cnrtErrorArgsInvalid, "fn is NULL");
    // The queue's worker runs it in order, so the queue's later work waits for it.
    queue_of_current_device(queue).enqueue(
        "cnrtInvokeHostFunc", [fn, args] { fn(args); }, false);
  });
}

EXPORT cnrtRet_t cnrtNotifierCreateWithFlags(cnrtNotifier_t* notifier, unsigned int flags) {
  return guarded("cnrtNotifierCreateWithFlags", [&] {
    if (!notifier) throw Error(cnrtErrorArgsInvalid, "notifier is NULL");
    if ((flags & ~static_cast<unsigned int>(CNRT_NOTIFIER_DISABLE_TIMING_SW)) != 0)
      throw Error(cnrtErrorArgsInvalid, "flags " + std::to_string(flags) + " has bits that are not emulated");
    *notifier = static_cast<cnrtNotifier_t>(
        machine().add_marker(current_device(), (flags & CNRT_NOTIFIER_DISABLE_TIMING_SW) == 0));
  });
}

EXPORT cnrtRet_t cnrtNotifierCreate(cnrtNotifier_t* notifier) {
  return cnrtNotifierCreateWithFlags(notifier, CNRT_NOTIFIER_DEFAULT);
}

EXPORT cnrtRet_t cnrtNotifierDestroy(cnrtNotifier_t notifier) {
  return guarded("cnrtNotifierDestroy", [&] { machine().remove_marker(notifier); });
}

EXPORT cnrtRet_t cnrtPlaceNotifier(cnrtNotifier_t notifier, cnrtQueue_t queue) {
  return guarded("cnrtPlaceNotifier", [&] {
    auto found = machine().marker(notifier);
    Queue& target = queue_of_current_device(queue);
    if (found->device() != target.device())
      throw Error(cnrtErrorIllegalState, "the notifier and the queue belong to different devices");
    found->place(target, "cnrtPlaceNotifier");
  });
}

EXPORT cnrtRet_t cnrtQueueWaitNotifier(cnrtNotifier_t notifier, cnrtQueue_t queue, unsigned int flags) {
  return guarded("cnrtQueueWaitNotifier", [&] {
    if (flags != 0) throw Error(cnrtErrorArgsInvalid, "flags must be 0");
    machine().marker(notifier)->enqueue_wait(queue_of_current_device(queue), "cnrtQueueWaitNotifier");
  });
}

EXPORT cnrtRet_t cnrtQueryNotifier(cnrtNotifier_t notifier) {
  return guarded("cnrtQueryNotifier", [&] {
    if (!machine().marker(notifier)->complete()) throw Error(cnrtErrorNotReady, "the notifier has not completed");
  });
}

EXPORT cnrtRet_t cnrtWaitNotifier(cnrtNotifier_t notifier) {
  return guarded("cnrtWaitNotifier", [&] { machine().marker(notifier)->wait(); });
}

EXPORT cnrtRet_t cnrtNotifierElapsedTime(cnrtNotifier_t start, cnrtNotifier_t end, float* milliseconds) {
  return guarded("cnrtNotifierElapsedTime", [&] {
    if (!milliseconds) throw Error(cnrtErrorArgsInvalid, "ms is NULL");
    std::chrono::steady_clock::time_point times[2];
    int i = 0;
    for (cnrtNotifier_t handle : {start, end}) {
      auto found = machine().marker(handle);
      if (!found->timing()) throw Error(cnrtErrorArgsInvalid, "a notifier was created without timing");
      switch (found->state(&times[i++])) {
        case Notifier::State::never_placed: throw Error(cnrtErrorArgsInvalid, "a notifier was never placed");
        case Notifier::State::pending: throw Error(cnrtErrorNotReady, "a notifier has not completed yet");
        case Notifier::State::done: break;
      }
    }
    *milliseconds = std::chrono::duration<float, std::milli>(times[1] - times[0]).count();
  });
}

EXPORT cnrtRet_t cnrtAcquireMemHandle(cnrtIpcMemHandle* handle, void* ptr) {
  return guarded("cnrtAcquireMemHandle", [&] {
    if (!handle || !ptr) throw Error(cnrtErrorArgsInvalid, "handle or ptr is NULL");
    for (int32_t d = 0; d < machine().device_count(); ++d) {
      DeviceMemory& memory = machine().memory(d);
      const auto [start, bytes] = memory.allocation_of(ptr);
      if (start == nullptr) continue;
      if (start != ptr) throw Error(cnrtErrorArgsInvalid, "ptr is inside an allocation, not its start");
      machine().export_range(ptr, bytes, "mlu");
      *handle = pack_handle(static_cast<unsigned long long>(getpid()), static_cast<unsigned long long>(memory.file()),
                            memory.file_offset(ptr));
      return;
    }
    throw Error(cnrtErrorArgsInvalid, "ptr is not device memory of this process");
  });
}

EXPORT cnrtRet_t cnrtMapMemHandle(void** ptr, cnrtIpcMemHandle handle, int flags) {
  return guarded("cnrtMapMemHandle", [&] {
    if (!ptr) throw Error(cnrtErrorArgsInvalid, "ptr is NULL");
    if (flags != 0) throw Error(cnrtErrorArgsInvalid, "flags must be 0");
    current_device();
    *ptr = machine().import_key(key_of(handle)).device_pointer;
  });
}

EXPORT cnrtRet_t cnrtUnMapMemHandle(void* ptr) {
  return guarded("cnrtUnMapMemHandle", [&] {
    if (!machine().close_import("", ptr)) throw Error(cnrtErrorArgsInvalid, "ptr is not a mapped IPC handle");
  });
}

// Every emulated function has exactly the signature the plugin's header declares.
#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnrtGetErrorStr);
H2_CHECK_SIGNATURE(cnrtGetLastError);
H2_CHECK_SIGNATURE(cnrtGetDeviceCount);
H2_CHECK_SIGNATURE(cnrtSetDevice);
H2_CHECK_SIGNATURE(cnrtGetDevice);
H2_CHECK_SIGNATURE(cnrtSyncDevice);
H2_CHECK_SIGNATURE(cnrtGetDeviceProperties);
H2_CHECK_SIGNATURE(cnrtDeviceGetAttribute);
H2_CHECK_SIGNATURE(cnrtMemGetInfo);
H2_CHECK_SIGNATURE(cnrtMalloc);
H2_CHECK_SIGNATURE(cnrtFree);
H2_CHECK_SIGNATURE(cnrtHostMalloc);
H2_CHECK_SIGNATURE(cnrtFreeHost);
H2_CHECK_SIGNATURE(cnrtQueueCreate);
H2_CHECK_SIGNATURE(cnrtQueueDestroy);
H2_CHECK_SIGNATURE(cnrtQueueSync);
H2_CHECK_SIGNATURE(cnrtQueueQuery);
H2_CHECK_SIGNATURE(cnrtMemcpyAsync_V2);
H2_CHECK_SIGNATURE(cnrtMemsetAsync);
H2_CHECK_SIGNATURE(cnrtInvokeHostFunc);
H2_CHECK_SIGNATURE(cnrtNotifierCreate);
H2_CHECK_SIGNATURE(cnrtNotifierCreateWithFlags);
H2_CHECK_SIGNATURE(cnrtNotifierDestroy);
H2_CHECK_SIGNATURE(cnrtPlaceNotifier);
H2_CHECK_SIGNATURE(cnrtQueueWaitNotifier);
H2_CHECK_SIGNATURE(cnrtQueryNotifier);
H2_CHECK_SIGNATURE(cnrtWaitNotifier);
H2_CHECK_SIGNATURE(cnrtNotifierElapsedTime);
H2_CHECK_SIGNATURE(cnrtAcquireMemHandle);
H2_CHECK_SIGNATURE(cnrtMapMemHandle);
H2_CHECK_SIGNATURE(cnrtUnMapMemHandle);
