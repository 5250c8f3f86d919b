// The emulated CNCL (libcncl.so under the emulated Neuware home): the subset mlu/cncl.h declares, on
// the shared-memory collectives of plugins/common/shm_collectives.hpp, between the processes of one
// node, one communicator per process and clique. Each data call is a kernel on the caller's queue
// (the emulated runtime's launch): it resolves the device pointers to the host memory behind them when
// it runs and blocks that queue's worker until the collective is done. A failure (a peer gone, an
// abort, the timeout) becomes the queue's error, which cnrtQueueSync reports; cnclAbortComm reaches
// every rank of the clique. Calls between cnclGroupStart and cnclGroupEnd are kept per communicator
// and queue, and enqueued together at cnclGroupEnd, sends and receives progressing together.
//
// MLU_EMULATOR_CNCL_TIMEOUT (seconds, default 300) bounds joining and each wait inside a collective.
// A test double for H2's tests, never installed.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "collective_checks.hpp"
#include "mlu/cncl.h"
#include "mlu_emulator.hpp"
#include "plugin_error.hpp"
#include "shm_collectives.hpp"

namespace mlu_cncl_emulator {
namespace {

using h2::plugin::ShmComm;
using mlu_emulator::current_device;
using mlu_emulator::device_view;
using mlu_emulator::launch;

static_assert(h2::plugin::kShmCommIdBytes <= CNCL_CLIQUE_ID_BYTES_SIZE);

struct Comm {
  int32_t device = 0;
  ShmComm shm;
};

// CNCL's handle: the communicator, shared with the kernels still queued.
}  // namespace
}  // namespace mlu_cncl_emulator

struct cnclComm {
  std::shared_ptr<mlu_cncl_emulator::Comm> comm;
};

namespace mlu_cncl_emulator {
namespace {

thread_local cnclResult_t last_error = CNCL_RET_SUCCESS;
thread_local std::string last_detail;
thread_local std::string error_text;

struct Failure {
  cnclResult_t code;
  std::string message;
};

cnclResult_t guarded(const char* call, const std::function<void()>& body) noexcept {
  cnclResult_t code = CNCL_RET_SUCCESS;
  try {
    body();
    return CNCL_RET_SUCCESS;
  } catch (const Failure& f) {
    code = f.code;
    last_detail = std::string(call) + ": " + f.message;
  } catch (const h2::plugin::PluginError& e) {
    code = e.status() == H2_STATUS_INVALID_ARGUMENT ? CNCL_RET_ERR_ARGUMENTS
           : e.status() == H2_STATUS_UNSUPPORTED    ? CNCL_RET_ERR_UNSUPPORTED
           : e.status() == H2_STATUS_OUT_OF_MEMORY  ? CNCL_RET_ERR_SYS_MALLOC
                                                    : CNCL_RET_ERR_INTERNAL;
    last_detail = std::string(call) + ": " + e.what();
  } catch (const std::exception& e) {
    code = CNCL_RET_ERR_INTERNAL;
    last_detail = std::string(call) + ": " + e.what();
  }
  last_error = code;
  return code;
}

std::chrono::milliseconds timeout() {
  const char* text = std::getenv("MLU_EMULATOR_CNCL_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0)
    throw Failure{CNCL_RET_ERR_ARGUMENTS,
                  std::string("MLU_EMULATOR_CNCL_TIMEOUT='") + text + "' is not a positive number of seconds"};
  return std::chrono::seconds(value);
}

std::shared_ptr<Comm> comm_of(cnclComm_t handle) {
  if (handle == nullptr) throw Failure{CNCL_RET_ERR_NULL_POINTER, "comm is NULL"};
  return handle->comm;
}

uint32_t h2_dtype(cnclDataType_t type) {
  switch (type) {
    case cnclFloat32: return H2_DTYPE_F32;
    case cnclFloat16: return H2_DTYPE_F16;
    case cnclBfloat16: return H2_DTYPE_BF16;
    case cnclInt32: return H2_DTYPE_I32;
    case cnclInt64: return H2_DTYPE_I64;
    case cnclUint8: return H2_DTYPE_U8;
    default:
      throw Failure{CNCL_RET_ERR_UNSUPPORTED,
                    "the emulator has no cnclDataType_t " + std::to_string(static_cast<int>(type))};
  }
}

uint32_t h2_op(cnclReduceOp_t op) {
  switch (op) {
    case cnclSum: return H2_REDUCE_SUM;
    case cnclMax: return H2_REDUCE_MAX;
    default:
      throw Failure{CNCL_RET_ERR_UNSUPPORTED, "the emulator reduces by sum and max only, not cnclReduceOp_t " +
                                                  std::to_string(static_cast<int>(op))};
  }
}

size_t bytes_of(size_t count, cnclDataType_t type) {
  return count * h2::plugin::collective_element_size(h2_dtype(type));
}

void check_queue(const Comm& comm, cnrtQueue_t queue) {
  if (mlu_emulator::queue_device(queue) != comm.device || current_device() != comm.device)
    throw Failure{CNCL_RET_ERR_ARGUMENTS, "the communicator is on device " + std::to_string(comm.device) +
                                              "; the queue and the calling thread's current device must be too"};
}

// The sends and receives of this thread's open group, per communicator and queue.
struct Group {
  int depth = 0;
  std::map<std::pair<std::shared_ptr<Comm>, cnrtQueue_t>, std::vector<ShmComm::Transfer>> transfers;
};
thread_local Group group;

// Enqueues `body(comm)` on `queue` (a queue of the communicator's device).
void enqueue(cnclComm_t handle, cnrtQueue_t queue, const char* name, std::function<void(Comm&)> body) {
  std::shared_ptr<Comm> comm = comm_of(handle);
  check_queue(*comm, queue);
  launch(queue, name, [comm, body = std::move(body)] { body(*comm); });
}

// A send or receive: enqueued alone, or kept for cnclGroupEnd. The pointer is resolved when it runs.
void transfer(const char* name, bool is_send, void* buffer, size_t count, cnclDataType_t type, int peer,
              cnclComm_t handle, cnrtQueue_t queue) {
  std::shared_ptr<Comm> comm = comm_of(handle);
  comm->shm.check_peer(peer);
  check_queue(*comm, queue);
  ShmComm::Transfer t{.send = is_send, .peer = peer, .from = buffer, .into = buffer, .bytes = bytes_of(count, type)};
  if (group.depth > 0) {
    group.transfers[{comm, queue}].push_back(t);
    return;
  }
  enqueue(handle, queue, name, [t](Comm& c) {
    std::vector<ShmComm::Transfer> one{t};
    void* host = device_view(t.from, t.bytes);
    one[0].from = host;
    one[0].into = host;
    c.shm.exchange(one);
  });
}

}  // namespace
}  // namespace mlu_cncl_emulator

using namespace mlu_cncl_emulator;

#define EXPORT extern "C" MLU_EMULATOR_EXPORT

// Not CNCL's: tells the plugin it loaded H2's emulation, so the library names it reports say so.
EXPORT const char* h2_emulated_library() {
  return "CNCL emulated on shared memory between the processes of one machine";
}

EXPORT cnclResult_t cnclGetLibVersion(int* major, int* minor, int* patch) {
  return guarded("cnclGetLibVersion", [&] {
    if (!major || !minor || !patch) throw Failure{CNCL_RET_ERR_NULL_POINTER, "major, minor or patch is NULL"};
    *major = 1, *minor = 25, *patch = 0;
  });
}

EXPORT const char* cnclGetErrorStr(cnclResult_t result) {
  switch (result) {
    case CNCL_RET_SUCCESS: error_text = "success"; break;
    case CNCL_RET_ERR_ARGUMENTS: error_text = "invalid arguments"; break;
    case CNCL_RET_ERR_NULL_POINTER: error_text = "null pointer"; break;
    case CNCL_RET_ERR_UNSUPPORTED: error_text = "unsupported"; break;
    case CNCL_RET_ERR_SYS_MALLOC: error_text = "system memory allocation failed"; break;
    default: error_text = "internal error"; break;
  }
  if (result != CNCL_RET_SUCCESS && result == last_error && !last_detail.empty())
    error_text += " (emulated CNCL: " + last_detail + ")";
  return error_text.c_str();
}

EXPORT cnclResult_t cnclGetCliqueId(cnclCliqueId* clique_id) {
  return guarded("cnclGetCliqueId", [&] {
    if (clique_id == nullptr) throw Failure{CNCL_RET_ERR_NULL_POINTER, "clique_id is NULL"};
    std::memset(clique_id, 0, sizeof *clique_id);
    h2::plugin::new_shm_comm_id(reinterpret_cast<uint8_t*>(clique_id->data));
  });
}

EXPORT cnclResult_t cnclInitComms(cnclComm_t* comms, int num_comm, const int* dev_list, const int* rank_list, int nrank,
                                  const cnclCliqueId* clique_id) {
  return guarded("cnclInitComms", [&] {
    if (!comms || !dev_list || !rank_list || !clique_id)
      throw Failure{CNCL_RET_ERR_NULL_POINTER, "comms, dev_list, rank_list or clique_id is NULL"};
    if (num_comm != 1)
      throw Failure{CNCL_RET_ERR_UNSUPPORTED,
                    "the emulator makes one communicator per process and clique, not " + std::to_string(num_comm)};
    auto made = std::shared_ptr<Comm>(new Comm{
        dev_list[0], ShmComm(reinterpret_cast<const uint8_t*>(clique_id->data), nrank, rank_list[0], timeout())});
    comms[0] = new cnclComm{std::move(made)};
  });
}

EXPORT cnclResult_t cnclDestroyComms(cnclComm_t* comms, int num_comm) {
  // Work still queued holds the communicator, which goes when the last of it has run.
  return guarded("cnclDestroyComms", [&] {
    if (comms == nullptr && num_comm > 0) throw Failure{CNCL_RET_ERR_NULL_POINTER, "comms is NULL"};
    for (int i = 0; i < num_comm; ++i) {
      comm_of(comms[i]);
      delete comms[i];
    }
  });
}

EXPORT cnclResult_t cnclAbortComm(cnclComm_t comm) {
  return guarded("cnclAbortComm", [&] {
    std::shared_ptr<Comm> c = comm_of(comm);
    c->shm.abort("cnclAbortComm on rank " + std::to_string(c->shm.rank()));
  });
}

EXPORT cnclResult_t cnclAllReduce(const void* send_buffer, void* recv_buffer, size_t count, cnclDataType_t data_type,
                                  cnclReduceOp_t reduce_op, cnclComm_t comm, cnrtQueue_t queue) {
  return guarded("cnclAllReduce", [&] {
    const uint32_t dtype = h2_dtype(data_type), op = h2_op(reduce_op);
    const size_t bytes = bytes_of(count, data_type);
    enqueue(comm, queue, "cnclAllReduce", [=](Comm& c) {
      c.shm.allreduce(device_view(send_buffer, bytes), device_view(recv_buffer, bytes), count, dtype, op);
    });
  });
}

EXPORT cnclResult_t cnclReduceScatter(const void* send_buffer, void* recv_buffer, size_t count,
                                      cnclDataType_t data_type, cnclReduceOp_t reduce_op, cnclComm_t comm,
                                      cnrtQueue_t queue) {
  return guarded("cnclReduceScatter", [&] {
    const uint32_t dtype = h2_dtype(data_type), op = h2_op(reduce_op);
    const size_t bytes = bytes_of(count, data_type);
    enqueue(comm, queue, "cnclReduceScatter", [=](Comm& c) {
      c.shm.reduce_scatter(device_view(send_buffer, bytes * static_cast<size_t>(c.shm.size())),
                           device_view(recv_buffer, bytes), count, dtype, op);
    });
  });
}

EXPORT cnclResult_t cnclAllGather(const void* send_buffer, void* recv_buffer, size_t count, cnclDataType_t data_type,
                                  cnclComm_t comm, cnrtQueue_t queue) {
  return guarded("cnclAllGather", [&] {
    const uint32_t dtype = h2_dtype(data_type);
    const size_t bytes = bytes_of(count, data_type);
    enqueue(comm, queue, "cnclAllGather", [=](Comm& c) {
      c.shm.allgather(device_view(send_buffer, bytes),
                      device_view(recv_buffer, bytes * static_cast<size_t>(c.shm.size())), count, dtype);
    });
  });
}

EXPORT cnclResult_t cnclBroadcast(const void* send_buffer, void* recv_buffer, size_t count, cnclDataType_t data_type,
                                  int root, cnclComm_t comm, cnrtQueue_t queue) {
  return guarded("cnclBroadcast", [&] {
    const uint32_t dtype = h2_dtype(data_type);
    const size_t bytes = bytes_of(count, data_type);
    const int rank = comm_of(comm)->shm.rank();
    enqueue(comm, queue, "cnclBroadcast", [=](Comm& c) {
      const void* from = rank == root ? device_view(send_buffer, bytes) : nullptr;
      c.shm.broadcast(from, device_view(recv_buffer, bytes), count, dtype, root);
    });
  });
}

EXPORT cnclResult_t cnclSend(void* buffer, size_t count, cnclDataType_t data_type, int dest, cnclComm_t comm,
                             cnrtQueue_t queue) {
  return guarded("cnclSend", [&] { transfer("cnclSend", true, buffer, count, data_type, dest, comm, queue); });
}

EXPORT cnclResult_t cnclRecv(void* buffer, size_t count, cnclDataType_t data_type, int source, cnclComm_t comm,
                             cnrtQueue_t queue) {
  return guarded("cnclRecv", [&] { transfer("cnclRecv", false, buffer, count, data_type, source, comm, queue); });
}

EXPORT cnclResult_t cnclGroupStart() {
  return guarded("cnclGroupStart", [] { ++group.depth; });
}

EXPORT cnclResult_t cnclGroupEnd() {
  return guarded("cnclGroupEnd", [] {
    if (group.depth == 0) throw Failure{CNCL_RET_ERR_ARGUMENTS, "cnclGroupEnd without cnclGroupStart"};
    if (--group.depth > 0) return;
    Group issued = std::move(group);
    group = Group{};
    for (auto& [key, transfers] : issued.transfers) {
      const auto& [comm, queue] = key;
      launch(queue, "cnclGroupEnd", [comm = comm, transfers = std::move(transfers)]() mutable {
        for (ShmComm::Transfer& t : transfers) {
          void* host = device_view(t.from, t.bytes);
          t.from = host;
          t.into = host;
        }
        comm->shm.exchange(transfers);
      });
    }
  });
}

// Each function has the signature mlu/cncl.h declares for it.
#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnclGetLibVersion);
H2_CHECK_SIGNATURE(cnclGetErrorStr);
H2_CHECK_SIGNATURE(cnclGetCliqueId);
H2_CHECK_SIGNATURE(cnclInitComms);
H2_CHECK_SIGNATURE(cnclDestroyComms);
H2_CHECK_SIGNATURE(cnclAbortComm);
H2_CHECK_SIGNATURE(cnclAllReduce);
H2_CHECK_SIGNATURE(cnclReduceScatter);
H2_CHECK_SIGNATURE(cnclAllGather);
H2_CHECK_SIGNATURE(cnclBroadcast);
H2_CHECK_SIGNATURE(cnclSend);
H2_CHECK_SIGNATURE(cnclRecv);
H2_CHECK_SIGNATURE(cnclGroupStart);
H2_CHECK_SIGNATURE(cnclGroupEnd);
