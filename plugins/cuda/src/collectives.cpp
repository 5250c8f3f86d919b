// NCCL behind the ABI's collective section. Communicators are NCCL's non-blocking ones
// (ncclConfig_t::blocking = 0), so that joining can time out and comm_abort can end a collective
// that waits for a peer that is gone: a call that NCCL leaves in progress is polled here until it
// is enqueued (or failed, or aborted), never on the device work itself.
#include "collectives.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.hpp"
#include "cuda_error.hpp"
#include "handle_registry.hpp"
#include "nccl_library.hpp"
#include "runtime.hpp"
#include "streams_used.hpp"
#include "vendor_library.hpp"

namespace h2::cuda {
namespace {

static_assert(sizeof(ncclUniqueId) <= H2_COMM_UNIQUE_ID_BYTES, "an ncclUniqueId must fit an H2_CommUniqueId");

struct Comm {
  int device = 0;
  int rank = 0, size = 0;
  ncclComm_t nccl = nullptr;
  // Set first by comm_abort, which then waits for the calls inside NCCL (`calls`, shared by them)
  // before ncclCommAbort frees the communicator; a call polling NCCL sees it and stops.
  std::atomic<bool> aborted = false;
  std::shared_mutex calls;
  bool freed = false;  // by ncclCommAbort or ncclCommDestroy; written under `calls` held exclusively
  std::mutex mutex;    // guards `reason`
  std::string reason;
  h2::plugin::StreamsUsed<Stream> streams;  // where work was issued: their error on an abort
};

h2::plugin::HandleRegistry<H2_Comm, Comm>& comms() {
  static h2::plugin::HandleRegistry<H2_Comm, Comm> registry("communicator");
  return registry;
}

const NcclLibrary& library() {
  return h2::plugin::required_library(nccl);
}

H2_Status status_of(ncclResult_t result) {
  return result == ncclInvalidArgument || result == ncclInvalidUsage ? H2_STATUS_INVALID_ARGUMENT
                                                                     : H2_STATUS_DEVICE_ERROR;
}

// Throws for anything but success or "in progress", naming the call and what NCCL says.
void check(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const NcclLibrary& nccl = library();
  const char* detail = nccl.get_last_error(comm);
  fail(status_of(result), std::string(call) + ": " + nccl.get_error_string(result) +
                              (detail != nullptr && *detail != '\0' ? std::string(" (") + detail + ")" : ""));
}

std::string aborted_message(Comm& comm) {
  std::lock_guard lock(comm.mutex);
  return "the NCCL communicator was aborted: " + comm.reason;
}

// Waits until NCCL has finished what a non-blocking call left in progress, or `deadline` passes
// (false then), or the communicator is aborted; throws for an error.
bool settle(Comm& comm, const char* call,
            std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
  const NcclLibrary& nccl = library();
  for (;;) {
    if (comm.aborted) fail(H2_STATUS_DEVICE_ERROR, std::string(call) + ": " + aborted_message(comm));
    ncclResult_t state = ncclSuccess;
    check(nccl.comm_get_async_error(comm.nccl, &state), "ncclCommGetAsyncError", comm.nccl);
    if (state != ncclInProgress) {
      check(state, call, comm.nccl);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ncclDataType_t nccl_type(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F32: return ncclFloat32;
    case H2_DTYPE_F16: return ncclFloat16;
    case H2_DTYPE_BF16: return ncclBfloat16;
    case H2_DTYPE_F64: return ncclFloat64;
    case H2_DTYPE_I32: return ncclInt32;
    case H2_DTYPE_I64: return ncclInt64;
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL: return ncclUint8;  // U8 reduced as bytes; BOOL only moved (check_collective_reduction)
    default: h2::plugin::collective_element_size(dtype);  // throws for a value that is no H2_DType
  }
  fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no NCCL type");
}

ncclRedOp_t nccl_op(uint32_t dtype, uint32_t op) {
  h2::plugin::check_collective_reduction(dtype, op);
  return op == H2_REDUCE_SUM ? ncclSum : op == H2_REDUCE_MEAN ? ncclAvg : ncclMax;
}

// The calls of this thread between group_start and group_end: their communicators, which NCCL may
// leave in progress at group_end.
struct Group {
  int depth = 0;
  H2_Stream* stream = nullptr;
  std::vector<std::shared_ptr<Comm>> comms;
};
thread_local Group group;

// Issues `call` (one NCCL data call on the communicator and a stream of its device): at once, or
// inside this thread's group, which issues it at group_end.
template <typename Call>
void issue(const std::shared_ptr<Comm>& comm, H2_Stream* stream_handle, const char* name, const Call& call) {
  if (comm->aborted) fail(H2_STATUS_DEVICE_ERROR, std::string(name) + ": " + aborted_message(*comm));
  std::shared_ptr<Stream> stream = runtime().stream(stream_handle);
  if (stream->device != comm->device)
    fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to device " + std::to_string(stream->device) +
                                         ", the communicator to device " + std::to_string(comm->device));
  if (h2::plugin::joins_group(group.depth, group.stream, stream_handle)) group.comms.push_back(comm);
  comm->streams.add(stream);
  use_device(comm->device);
  std::shared_lock calls(comm->calls);
  if (comm->aborted) fail(H2_STATUS_DEVICE_ERROR, std::string(name) + ": " + aborted_message(*comm));
  check(call(comm->nccl, stream->stream), name, comm->nccl);
  if (group.depth == 0) settle(*comm, name);
}

void check_count(const void* buffer, uint64_t count, const char* name) {
  if (count > 0 && buffer == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

H2_Status get_unique_id(H2_CommUniqueId* id) {
  return guarded("get_unique_id", [&] {
    require(id, "id");
    std::memset(id, 0, sizeof *id);
    ncclUniqueId unique;
    check(library().get_unique_id(&unique), "ncclGetUniqueId", nullptr);
    std::memcpy(id->bytes, &unique, sizeof unique);
  });
}

H2_Status comm_init_rank(int32_t device, const H2_CommUniqueId* id, int32_t nranks, int32_t rank, uint32_t timeout_ms,
                         H2_Comm** out) {
  return guarded("comm_init_rank", [&] {
    require(id, "id");
    require(out, "comm");
    if (nranks < 1 || rank < 0 || rank >= nranks)
      fail(H2_STATUS_INVALID_ARGUMENT,
           "rank " + std::to_string(rank) + " of a communicator of " + std::to_string(nranks) + " ranks");
    runtime().check_device(device);
    use_device(device);
    const NcclLibrary& nccl = library();
    auto comm = std::make_shared<Comm>();
    comm->device = device;
    comm->rank = rank;
    comm->size = nranks;
    ncclUniqueId unique;
    std::memcpy(&unique, id->bytes, sizeof unique);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(nccl.comm_init_rank_config(&comm->nccl, nranks, unique, rank, &config), "ncclCommInitRankConfig", comm->nccl);
    const auto timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300'000);
    bool joined = false;
    try {
      joined = settle(*comm, "ncclCommInitRankConfig", std::chrono::steady_clock::now() + timeout);
    } catch (...) {
      nccl.comm_abort(comm->nccl);
      throw;
    }
    if (!joined) {
      nccl.comm_abort(comm->nccl);
      // NCCL's bootstrap does not say which ranks it waits for.
      fail(H2_STATUS_DEVICE_ERROR, "not all " + std::to_string(nranks) + " ranks joined the NCCL communicator within " +
                                       std::to_string(timeout.count()) + " ms (NCCL does not say which are missing)");
    }
    *out = comms().add(std::move(comm));
  });
}

H2_Status comm_abort(H2_Comm* handle, const char* reason) {
  return guarded("comm_abort", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const std::string why = reason != nullptr ? reason : "aborted";
    {
      std::lock_guard lock(comm->mutex);
      if (comm->reason.empty()) comm->reason = why;
    }
    if (comm->aborted.exchange(true)) return;  // once
    // What waits for the streams' work learns why before NCCL ends that work.
    const std::string message = aborted_message(*comm);
    comm->streams.for_each([&](Stream& stream) { stream.set_sticky(message); });
    std::unique_lock calls(comm->calls);  // no call is inside NCCL with it now, nor will be
    if (!comm->freed) library().comm_abort(comm->nccl);
    comm->freed = true;
  });
}

H2_Status comm_destroy(H2_Comm* handle) {
  return guarded("comm_destroy", [&] {
    std::shared_ptr<Comm> comm = comms().take(handle);
    const NcclLibrary& nccl = library();
    std::unique_lock calls(comm->calls);  // a comm_abort meanwhile waits, then finds it freed
    if (comm->freed) return;              // ncclCommAbort freed it
    comm->freed = true;
    use_device(comm->device);
    // Finalize flushes what NCCL still holds of the communicator (the caller synchronized its
    // work). Where that fails or hangs (a peer gone), the communicator is aborted instead, which
    // also frees it.
    try {
      check(nccl.comm_finalize(comm->nccl), "ncclCommFinalize", comm->nccl);
      if (!settle(*comm, "ncclCommFinalize", std::chrono::steady_clock::now() + std::chrono::seconds(60)))
        fail(H2_STATUS_DEVICE_ERROR, "ncclCommFinalize did not finish within 60 s; the communicator was aborted");
    } catch (...) {
      nccl.comm_abort(comm->nccl);
      throw;
    }
    check(nccl.comm_destroy(comm->nccl), "ncclCommDestroy", nullptr);
  });
}

H2_Status allreduce(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                    H2_Stream* stream) {
  return guarded("allreduce", [&] {
    const ncclRedOp_t reduce = nccl_op(dtype, op);
    const ncclDataType_t type = nccl_type(dtype);
    check_count(send, count, "send");
    check_count(recv, count, "recv");
    issue(comms().get(comm), stream, "ncclAllReduce",
          [&](ncclComm_t c, cudaStream_t s) { return library().all_reduce(send, recv, count, type, reduce, c, s); });
  });
}

H2_Status reduce_scatter(H2_Comm* comm, const void* send, void* recv, uint64_t recv_count, uint32_t dtype, uint32_t op,
                         H2_Stream* stream) {
  return guarded("reduce_scatter", [&] {
    const ncclRedOp_t reduce = nccl_op(dtype, op);
    const ncclDataType_t type = nccl_type(dtype);
    check_count(send, recv_count, "send");
    check_count(recv, recv_count, "recv");
    issue(comms().get(comm), stream, "ncclReduceScatter", [&](ncclComm_t c, cudaStream_t s) {
      return library().reduce_scatter(send, recv, recv_count, type, reduce, c, s);
    });
  });
}

H2_Status allgather(H2_Comm* comm, const void* send, void* recv, uint64_t send_count, uint32_t dtype,
                    H2_Stream* stream) {
  return guarded("allgather", [&] {
    const ncclDataType_t type = nccl_type(dtype);
    check_count(send, send_count, "send");
    check_count(recv, send_count, "recv");
    issue(comms().get(comm), stream, "ncclAllGather",
          [&](ncclComm_t c, cudaStream_t s) { return library().all_gather(send, recv, send_count, type, c, s); });
  });
}

H2_Status broadcast(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                    H2_Stream* stream) {
  return guarded("broadcast", [&] {
    const ncclDataType_t type = nccl_type(dtype);
    std::shared_ptr<Comm> comm = comms().get(handle);
    if (root < 0 || root >= comm->size)
      fail(H2_STATUS_INVALID_ARGUMENT, "root " + std::to_string(root) + " of " + std::to_string(comm->size));
    if (comm->rank == root) check_count(send, count, "send");
    check_count(recv, count, "recv");
    issue(comm, stream, "ncclBroadcast",
          [&](ncclComm_t c, cudaStream_t s) { return library().broadcast(send, recv, count, type, root, c, s); });
  });
}

H2_Status send(H2_Comm* handle, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("send", [&] {
    const ncclDataType_t type = nccl_type(dtype);
    std::shared_ptr<Comm> comm = comms().get(handle);
    h2::plugin::check_collective_peer(peer, comm->rank, comm->size);
    check_count(buffer, count, "buffer");
    issue(comm, stream, "ncclSend",
          [&](ncclComm_t c, cudaStream_t s) { return library().send(buffer, count, type, peer, c, s); });
  });
}

H2_Status recv(H2_Comm* handle, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("recv", [&] {
    const ncclDataType_t type = nccl_type(dtype);
    std::shared_ptr<Comm> comm = comms().get(handle);
    h2::plugin::check_collective_peer(peer, comm->rank, comm->size);
    check_count(buffer, count, "buffer");
    issue(comm, stream, "ncclRecv",
          [&](ncclComm_t c, cudaStream_t s) { return library().recv(buffer, count, type, peer, c, s); });
  });
}

H2_Status group_start() {
  return guarded("group_start", [&] {
    check(library().group_start(), "ncclGroupStart", nullptr);
    ++group.depth;
  });
}

H2_Status group_end() {
  return guarded("group_end", [&] {
    if (group.depth == 0) fail(H2_STATUS_INVALID_ARGUMENT, "group_end without group_start");
    if (group.depth > 1) {
      --group.depth;
      check(library().group_end(), "ncclGroupEnd", nullptr);
      return;
    }
    Group issued = std::move(group);
    group = Group{};
    // The group's communicators stay allocated while NCCL issues the group: no comm_abort frees one
    // meanwhile (each distinct one locked once, in address order as every group does).
    std::vector<std::shared_ptr<Comm>> distinct = issued.comms;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    std::vector<std::shared_lock<std::shared_mutex>> locks;
    for (const auto& comm : distinct) {
      locks.emplace_back(comm->calls);
      // An abort between the group's calls and here freed a communicator NCCL's group still names:
      // the group cannot be issued (the job has failed; this thread's NCCL group stays open).
      if (comm->freed) fail(H2_STATUS_DEVICE_ERROR, "ncclGroupEnd: " + aborted_message(*comm));
    }
    const ncclResult_t result = library().group_end();
    check(result, "ncclGroupEnd", nullptr);
    // Non-blocking communicators may leave the group's calls in progress: every one settles (NCCL
    // needs each polled before its next call), and the first failure is reported.
    std::exception_ptr first;
    for (const auto& comm : distinct) {
      try {
        settle(*comm, "ncclGroupEnd");
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  });
}

H2_CollectiveTable make_table(const NcclLibrary& nccl) {
  return {
      .struct_size = sizeof(H2_CollectiveTable),
      .library_name = nccl.name.c_str(),
      .scope = H2_COMM_SCOPE_NETWORK,
      .unique_id_bytes = sizeof(ncclUniqueId),
      .get_unique_id = get_unique_id,
      .comm_init_rank = comm_init_rank,
      .comm_destroy = comm_destroy,
      .comm_abort = comm_abort,
      .allreduce = allreduce,
      .reduce_scatter = reduce_scatter,
      .allgather = allgather,
      .broadcast = broadcast,
      .send = send,
      .recv = recv,
      .group_start = group_start,
      .group_end = group_end,
  };
}

}  // namespace

const H2_CollectiveTable* collective_table() {
  return h2::plugin::collective_table_of(nccl, make_table);
}

}  // namespace h2::cuda
