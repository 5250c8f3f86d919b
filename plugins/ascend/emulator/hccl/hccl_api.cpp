// The emulated HCCL (libhccl.so under the emulated CANN home): the subset ascend/hccl.h declares, on
// the shared-memory collectives of plugins/common/shm_collectives.hpp, between the processes of one
// node. Each data call is a kernel on the caller's stream (the emulated runtime's launch): it resolves
// the device pointers to the host memory behind them when it runs and blocks that stream's worker
// until the collective is done, as the device would. A failure (a peer gone, the timeout) becomes the
// stream's error, which aclrtSynchronizeStream reports with its message.
//
// HCCL_CONNECT_TIMEOUT (seconds, default 120) bounds joining and HCCL_EXEC_TIMEOUT (seconds, default
// 1836) each wait inside a collective, as in HCCL. A test double for H2's tests, never installed.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ascend/hccl.h"
#include "collective_checks.hpp"
#include "emulator.hpp"
#include "plugin_error.hpp"
#include "shm_collectives.hpp"

namespace ascend_hccl_emulator {
namespace {

using ascend_emulator::current_device;
using ascend_emulator::device_view;
using ascend_emulator::launch;
using ascend_emulator::set_recent_error;
using h2::plugin::ShmComm;

static_assert(h2::plugin::kShmCommIdBytes <= HCCL_ROOT_INFO_BYTES);

struct Comm {
  int32_t device = 0;
  ShmComm shm;
};

// A failed call: its code and the message aclGetRecentErrMsg then returns.
struct Failure {
  HcclResult code;
  std::string message;
};

HcclResult guarded(const char* call, const std::function<void()>& body) noexcept {
  try {
    body();
    return HCCL_SUCCESS;
  } catch (const Failure& f) {
    set_recent_error(std::string(call) + ": " + f.message);
    return f.code;
  } catch (const h2::plugin::PluginError& e) {
    set_recent_error(std::string(call) + ": " + e.what());
    return e.status() == H2_STATUS_INVALID_ARGUMENT ? HCCL_E_PARA
           : e.status() == H2_STATUS_UNSUPPORTED    ? HCCL_E_NOT_SUPPORT
           : e.status() == H2_STATUS_OUT_OF_MEMORY  ? HCCL_E_MEMORY
                                                    : HCCL_E_INTERNAL;
  } catch (const std::exception& e) {
    set_recent_error(std::string(call) + ": " + e.what());
    return HCCL_E_INTERNAL;
  }
}

std::chrono::milliseconds seconds_from(const char* variable, int fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return std::chrono::seconds(fallback);
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0)
    throw Failure{HCCL_E_PARA, std::string(variable) + "='" + text + "' is not a positive number of seconds"};
  return std::chrono::seconds(value);
}

std::shared_ptr<Comm>& comm_of(HcclComm handle) {
  if (handle == nullptr) throw Failure{HCCL_E_PTR, "comm is NULL"};
  return *static_cast<std::shared_ptr<Comm>*>(handle);
}

uint32_t h2_dtype(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_FP32: return H2_DTYPE_F32;
    case HCCL_DATA_TYPE_FP16: return H2_DTYPE_F16;
    case HCCL_DATA_TYPE_BFP16: return H2_DTYPE_BF16;
    case HCCL_DATA_TYPE_FP64: return H2_DTYPE_F64;
    case HCCL_DATA_TYPE_INT32: return H2_DTYPE_I32;
    case HCCL_DATA_TYPE_INT64: return H2_DTYPE_I64;
    case HCCL_DATA_TYPE_UINT8: return H2_DTYPE_U8;
    default: throw Failure{HCCL_E_NOT_SUPPORT, "the emulator has no HcclDataType " + std::to_string(type)};
  }
}

uint32_t h2_op(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return H2_REDUCE_SUM;
    case HCCL_REDUCE_MAX: return H2_REDUCE_MAX;
    default:
      throw Failure{HCCL_E_NOT_SUPPORT,
                    "the emulator reduces by sum and max only, not HcclReduceOp " + std::to_string(op)};
  }
}

size_t bytes_of(uint64_t count, HcclDataType type) {
  return count * h2::plugin::collective_element_size(h2_dtype(type));
}

// Enqueues `body(comm)` on `stream`, which must be a stream of the communicator's device.
void enqueue(HcclComm handle, aclrtStream stream, const char* name, std::function<void(Comm&)> body) {
  std::shared_ptr<Comm> comm = comm_of(handle);
  if (current_device() != comm->device)
    throw Failure{HCCL_E_PARA, "the communicator is on device " + std::to_string(comm->device) +
                                   ", the calling thread's current device is " + std::to_string(current_device())};
  launch(stream, name, [comm, body = std::move(body)] { body(*comm); });
}

}  // namespace
}  // namespace ascend_hccl_emulator

using namespace ascend_hccl_emulator;

#define EXPORT extern "C" ASCEND_EMULATOR_EXPORT

// Not HCCL's: tells the plugin it loaded H2's emulation, so the library names it reports say so.
EXPORT const char* h2_emulated_library() {
  return "HCCL emulated on shared memory between the processes of one machine";
}

EXPORT HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
  return guarded("HcclGetRootInfo", [&] {
    if (rootInfo == nullptr) throw Failure{HCCL_E_PTR, "rootInfo is NULL"};
    std::memset(rootInfo, 0, sizeof *rootInfo);
    h2::plugin::new_shm_comm_id(reinterpret_cast<uint8_t*>(rootInfo->internal));
  });
}

EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm) {
  return guarded("HcclCommInitRootInfo", [&] {
    if (rootInfo == nullptr || comm == nullptr) throw Failure{HCCL_E_PTR, "rootInfo or comm is NULL"};
    const int32_t device = current_device();
    const auto connect = seconds_from("HCCL_CONNECT_TIMEOUT", 120);
    const auto exec = seconds_from("HCCL_EXEC_TIMEOUT", 1836);
    auto made =
        std::shared_ptr<Comm>(new Comm{device, ShmComm(reinterpret_cast<const uint8_t*>(rootInfo->internal),
                                                       static_cast<int>(nRanks), static_cast<int>(rank), connect)});
    made->shm.set_timeout(exec);
    *comm = new std::shared_ptr<Comm>(std::move(made));
  });
}

EXPORT HcclResult HcclCommDestroy(HcclComm comm) {
  // Work still queued holds the communicator, which goes when the last of it has run.
  return guarded("HcclCommDestroy", [&] {
    comm_of(comm);
    delete static_cast<std::shared_ptr<Comm>*>(comm);
  });
}

EXPORT HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
  // The emulator's failures are its streams' errors; the communicator keeps none of its own.
  return guarded("HcclGetCommAsyncError", [&] {
    comm_of(comm);
    if (asyncError == nullptr) throw Failure{HCCL_E_PTR, "asyncError is NULL"};
    *asyncError = HCCL_SUCCESS;
  });
}

EXPORT const char* HcclGetErrorString(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS: return "success";
    case HCCL_E_PARA: return "parameter error";
    case HCCL_E_PTR: return "empty pointer";
    case HCCL_E_MEMORY: return "memory error";
    case HCCL_E_INTERNAL: return "internal error";
    case HCCL_E_NOT_SUPPORT: return "not supported";
    case HCCL_E_TIMEOUT: return "timeout";
    default: return "unknown error";
  }
}

EXPORT HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                                HcclComm comm, aclrtStream stream) {
  return guarded("HcclAllReduce", [&] {
    const uint32_t dtype = h2_dtype(dataType), reduce = h2_op(op);
    const size_t bytes = bytes_of(count, dataType);
    enqueue(comm, stream, "HcclAllReduce", [=](Comm& c) {
      c.shm.allreduce(device_view(sendBuf, bytes), device_view(recvBuf, bytes), count, dtype, reduce);
    });
  });
}

EXPORT HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                    HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  return guarded("HcclReduceScatter", [&] {
    const uint32_t dtype = h2_dtype(dataType), reduce = h2_op(op);
    const size_t bytes = bytes_of(recvCount, dataType);
    enqueue(comm, stream, "HcclReduceScatter", [=](Comm& c) {
      c.shm.reduce_scatter(device_view(sendBuf, bytes * static_cast<size_t>(c.shm.size())), device_view(recvBuf, bytes),
                           recvCount, dtype, reduce);
    });
  });
}

EXPORT HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                                aclrtStream stream) {
  return guarded("HcclAllGather", [&] {
    const uint32_t dtype = h2_dtype(dataType);
    const size_t bytes = bytes_of(sendCount, dataType);
    enqueue(comm, stream, "HcclAllGather", [=](Comm& c) {
      c.shm.allgather(device_view(sendBuf, bytes), device_view(recvBuf, bytes * static_cast<size_t>(c.shm.size())),
                      sendCount, dtype);
    });
  });
}

EXPORT HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                aclrtStream stream) {
  return guarded("HcclBroadcast", [&] {
    const uint32_t dtype = h2_dtype(dataType);
    const size_t bytes = bytes_of(count, dataType);
    enqueue(comm, stream, "HcclBroadcast", [=](Comm& c) {
      void* data = device_view(buf, bytes);
      c.shm.broadcast(data, data, count, dtype, static_cast<int>(root));
    });
  });
}

namespace ascend_hccl_emulator {
namespace {

// The items' transfers, resolved to host memory when the kernel runs.
void exchange(Comm& c, const std::vector<HcclSendRecvItem>& items) {
  std::vector<ShmComm::Transfer> transfers;
  for (const HcclSendRecvItem& item : items) {
    const size_t bytes = bytes_of(item.count, item.dataType);
    ShmComm::Transfer t{
        .send = item.sendRecvType == HCCL_SEND, .peer = static_cast<int>(item.remoteRank), .bytes = bytes};
    if (t.send)
      t.from = device_view(item.buf, bytes);
    else
      t.into = device_view(item.buf, bytes);
    transfers.push_back(t);
  }
  c.shm.exchange(transfers);
}

HcclResult batch(const char* call, std::vector<HcclSendRecvItem> items, HcclComm comm, aclrtStream stream) {
  return guarded(call, [&] {
    std::shared_ptr<Comm> c = comm_of(comm);
    for (const HcclSendRecvItem& item : items) {
      if (item.sendRecvType != HCCL_SEND && item.sendRecvType != HCCL_RECV)
        throw Failure{HCCL_E_PARA,
                      "sendRecvType " + std::to_string(item.sendRecvType) + " is neither send nor receive"};
      bytes_of(item.count, item.dataType);  // a type the emulator has
      c->shm.check_peer(static_cast<int>(item.remoteRank));
    }
    enqueue(comm, stream, call, [items = std::move(items)](Comm& on) { exchange(on, items); });
  });
}

}  // namespace
}  // namespace ascend_hccl_emulator

EXPORT HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                           aclrtStream stream) {
  return batch("HcclSend", {HcclSendRecvItem{HCCL_SEND, sendBuf, count, dataType, destRank}}, comm, stream);
}

EXPORT HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                           aclrtStream stream) {
  return batch("HcclRecv", {HcclSendRecvItem{HCCL_RECV, recvBuf, count, dataType, srcRank}}, comm, stream);
}

EXPORT HcclResult HcclBatchSendRecv(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                    aclrtStream stream) {
  if (sendRecvInfo == nullptr && itemNum > 0)
    return guarded("HcclBatchSendRecv", [] { throw Failure{HCCL_E_PTR, "sendRecvInfo is NULL"}; });
  return batch("HcclBatchSendRecv", std::vector<HcclSendRecvItem>(sendRecvInfo, sendRecvInfo + itemNum), comm, stream);
}

// Each function has the signature ascend/hccl.h declares for it.
#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(HcclGetRootInfo);
H2_CHECK_SIGNATURE(HcclCommInitRootInfo);
H2_CHECK_SIGNATURE(HcclCommDestroy);
H2_CHECK_SIGNATURE(HcclGetCommAsyncError);
H2_CHECK_SIGNATURE(HcclGetErrorString);
H2_CHECK_SIGNATURE(HcclAllReduce);
H2_CHECK_SIGNATURE(HcclReduceScatter);
H2_CHECK_SIGNATURE(HcclAllGather);
H2_CHECK_SIGNATURE(HcclBroadcast);
H2_CHECK_SIGNATURE(HcclSend);
H2_CHECK_SIGNATURE(HcclRecv);
H2_CHECK_SIGNATURE(HcclBatchSendRecv);
