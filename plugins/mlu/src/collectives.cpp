// CNCL behind the ABI's collective section: one communicator per process and clique (cnclInitComms
// with one device), the data calls on the stream's CNRT queue, groups as CNCL's own. Two things CNCL
// does not do as the ABI asks, and what the plugin does instead:
// - Joining has no timeout: cnclInitComms runs on a helper thread and comm_init_rank fails at
//   `timeout_ms` (plugins/common/deadline_join.hpp).
// - There is no average: MEAN divides by the rank count (CNNL) on the same queue, before the sum of
//   an allreduce, after that of a reduce-scatter.
// comm_abort marks the streams the communicator used with its reason, then cnclAbortComm ends the
// work CNCL holds.
#include "collectives.hpp"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cncl_library.hpp"
#include "collective_checks.hpp"
#include "deadline_join.hpp"
#include "handle_registry.hpp"
#include "ops/cnnl_math.hpp"
#include "plugin_error.hpp"
#include "runtime.hpp"
#include "vendor_comm.hpp"
#include "vendor_library.hpp"

namespace h2::mlu {
namespace {

using h2::plugin::fail;
using h2::plugin::guarded;
using h2::plugin::require;

static_assert(sizeof(cnclCliqueId) <= H2_COMM_UNIQUE_ID_BYTES, "a cnclCliqueId must fit an H2_CommUniqueId");

using Comm = h2::plugin::VendorComm<Stream, cnclComm_t>;

h2::plugin::HandleRegistry<H2_Comm, Comm>& comms() {
  static h2::plugin::HandleRegistry<H2_Comm, Comm> registry("communicator");
  return registry;
}

const CnclLibrary& library() {
  return h2::plugin::required_library(cncl);
}

// Throws for anything but success, naming the call and CNCL's words for the code.
// `words`: CNCL's text as the thread that made the call read it (its detail is that thread's).
void check(cnclResult_t result, const char* call, const char* words = nullptr) {
  if (result == CNCL_RET_SUCCESS) return;
  if (words == nullptr) words = library().cnclGetErrorStr(result);
  fail(result == CNCL_RET_ERR_ARGUMENTS || result == CNCL_RET_ERR_NULL_POINTER ? H2_STATUS_INVALID_ARGUMENT
       : result == CNCL_RET_ERR_UNSUPPORTED                                    ? H2_STATUS_UNSUPPORTED
                                                                               : H2_STATUS_DEVICE_ERROR,
       std::string(call) + ": CNCL error " + std::to_string(static_cast<int>(result)) +
           (words != nullptr && *words ? std::string(" (") + words + ")" : ""));
}

cnclDataType_t cncl_type(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F32: return cnclFloat32;
    case H2_DTYPE_F16: return cnclFloat16;
    case H2_DTYPE_BF16: return cnclBfloat16;
    case H2_DTYPE_I32: return cnclInt32;
    case H2_DTYPE_I64: return cnclInt64;
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL: return cnclUint8;  // U8 reduced as bytes; BOOL only moved (check_collective_reduction)
    default: h2::plugin::collective_element_size(dtype);  // throws for a value that is no H2_DType
  }
  fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no CNCL type (CNCL has no 64-bit float)");
}

cnclReduceOp_t cncl_op(uint32_t dtype, uint32_t op) {
  h2::plugin::check_collective_reduction(dtype, op);
  // MEAN: a sum of the values divided by the rank count (divide_by_ranks).
  return op == H2_REDUCE_MAX ? cnclMax : cnclSum;
}

// `count` elements of `dtype` at `data`, checked to lie in one device allocation of this plugin
// (CNCL would fault on anything else).
void* device_buffer(const void* data, uint64_t count, uint32_t dtype, const char* role) {
  return h2::plugin::library_buffer(data, count, dtype, role,
                                    [](const void* p, uint64_t bytes) { return runtime().is_device_memory(p, bytes); });
}

// The stream `handle` names, checked against the communicator, bound, and remembered for an abort.
std::shared_ptr<Stream> stream_for(const std::shared_ptr<Comm>& comm, H2_Stream* handle, const char* name) {
  std::shared_ptr<Stream> stream = comm->use(runtime().stream(handle), name);
  runtime().bind(comm->device());
  return stream;
}

// into = from / the rank count, for MEAN: before CNCL's sum of an allreduce (so that an f16 sum does
// not overflow where the mean fits, as NCCL's average), after it for a reduce-scatter (whose input
// is the caller's, and larger).
void divide_by_ranks(Stream& stream, const void* from, void* into, uint64_t count, uint32_t dtype, int ranks) {
  if (count > 0)
    CnnlMath(stream).divide(h2::plugin::flat_tensor(into, dtype, count), h2::plugin::flat_tensor(from, dtype, count),
                            static_cast<double>(ranks));
}

// Every call of a group must use one stream (the ABI); CNCL checks nothing of the kind.
thread_local int group_depth = 0;
thread_local H2_Stream* group_stream = nullptr;

void check_group_stream(H2_Stream* handle) {
  h2::plugin::joins_group(group_depth, group_stream, handle);
}

H2_Status get_unique_id(H2_CommUniqueId* id) {
  return guarded("get_unique_id", [&] {
    require(id, "id");
    std::memset(id, 0, sizeof *id);
    cnclCliqueId clique;
    check(library().cnclGetCliqueId(&clique), "cnclGetCliqueId");
    std::memcpy(id->bytes, &clique, sizeof clique);
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
    const CnclLibrary& cncl = library();
    auto clique = std::make_shared<cnclCliqueId>();
    std::memcpy(clique.get(), id->bytes, sizeof *clique);
    const auto timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300'000);
    cnclComm_t made = nullptr;
    auto words = std::make_shared<std::string>();  // the helper thread's text of a failed join
    const int code = h2::plugin::join_by_deadline<cnclComm_t>(
        timeout, CNCL_RET_SUCCESS,
        [clique, words, device, nranks, rank, &cncl](cnclComm_t& comm) {
          const cnclResult_t result = cncl.cnclInitComms(&comm, 1, &device, &rank, nranks, clique.get());
          if (result != CNCL_RET_SUCCESS) *words = cncl.cnclGetErrorStr(result);
          return result;
        },
        [&cncl](cnclComm_t comm) { cncl.cnclDestroyComms(&comm, 1); }, made,
        "not all " + std::to_string(nranks) + " ranks joined the CNCL communicator within " +
            std::to_string(timeout.count()) + " ms (CNCL does not say which are missing)");
    check(static_cast<cnclResult_t>(code), "cnclInitComms", words->c_str());
    *out = comms().add(std::make_shared<Comm>("CNCL", device, rank, nranks, made));
  });
}

H2_Status comm_abort(H2_Comm* handle, const char* reason) {
  return guarded("comm_abort", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    // What waits for the streams' work learns why before CNCL ends that work.
    if (comm->abort(reason)) check(library().cnclAbortComm(comm->handle()), "cnclAbortComm");
  });
}

H2_Status comm_destroy(H2_Comm* handle) {
  return guarded("comm_destroy", [&] {
    std::shared_ptr<Comm> comm = comms().take(handle);
    comm->destroyed();
    runtime().bind(comm->device());
    check(library().cnclDestroyComms(&comm->handle(), 1), "cnclDestroyComms");
  });
}

H2_Status allreduce(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                    H2_Stream* stream_handle) {
  return guarded("allreduce", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const cnclReduceOp_t reduce = cncl_op(dtype, op);
    const cnclDataType_t type = cncl_type(dtype);
    const void* from = device_buffer(send, count, dtype, "send");
    void* into = device_buffer(recv, count, dtype, "recv");
    check_group_stream(stream_handle);
    auto stream = stream_for(comm, stream_handle, "cnclAllReduce");
    if (op == H2_REDUCE_MEAN) {
      divide_by_ranks(*stream, from, into, count, dtype, comm->size());
      from = into;
    }
    check(library().cnclAllReduce(from, into, count, type, reduce, comm->handle(), stream->queue), "cnclAllReduce");
  });
}

H2_Status reduce_scatter(H2_Comm* handle, const void* send, void* recv, uint64_t recv_count, uint32_t dtype,
                         uint32_t op, H2_Stream* stream_handle) {
  return guarded("reduce_scatter", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const cnclReduceOp_t reduce = cncl_op(dtype, op);
    const cnclDataType_t type = cncl_type(dtype);
    const void* from = device_buffer(send, recv_count * static_cast<uint64_t>(comm->size()), dtype, "send");
    void* into = device_buffer(recv, recv_count, dtype, "recv");
    check_group_stream(stream_handle);
    auto stream = stream_for(comm, stream_handle, "cnclReduceScatter");
    check(library().cnclReduceScatter(from, into, recv_count, type, reduce, comm->handle(), stream->queue),
          "cnclReduceScatter");
    if (op == H2_REDUCE_MEAN) divide_by_ranks(*stream, into, into, recv_count, dtype, comm->size());
  });
}

H2_Status allgather(H2_Comm* handle, const void* send, void* recv, uint64_t send_count, uint32_t dtype,
                    H2_Stream* stream_handle) {
  return guarded("allgather", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const cnclDataType_t type = cncl_type(dtype);
    const void* from = device_buffer(send, send_count, dtype, "send");
    void* into = device_buffer(recv, send_count * static_cast<uint64_t>(comm->size()), dtype, "recv");
    check_group_stream(stream_handle);
    auto stream = stream_for(comm, stream_handle, "cnclAllGather");
    check(library().cnclAllGather(from, into, send_count, type, comm->handle(), stream->queue), "cnclAllGather");
  });
}

H2_Status broadcast(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                    H2_Stream* stream_handle) {
  return guarded("broadcast", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    if (root < 0 || root >= comm->size())
      fail(H2_STATUS_INVALID_ARGUMENT, "root " + std::to_string(root) + " of " + std::to_string(comm->size()));
    const cnclDataType_t type = cncl_type(dtype);
    void* into = device_buffer(recv, count, dtype, "recv");
    const void* from = comm->rank() == root ? device_buffer(send, count, dtype, "send") : nullptr;
    check_group_stream(stream_handle);
    auto stream = stream_for(comm, stream_handle, "cnclBroadcast");
    check(library().cnclBroadcast(from, into, count, type, root, comm->handle(), stream->queue), "cnclBroadcast");
  });
}

void point_to_point(H2_Comm* handle, bool is_send, void* buffer, uint64_t count, uint32_t dtype, int32_t peer,
                    H2_Stream* stream_handle) {
  std::shared_ptr<Comm> comm = comms().get(handle);
  const cnclDataType_t type = cncl_type(dtype);
  h2::plugin::check_collective_peer(peer, comm->rank(), comm->size());
  void* data = device_buffer(buffer, count, dtype, "buffer");
  check_group_stream(stream_handle);
  const char* name = is_send ? "cnclSend" : "cnclRecv";
  auto stream = stream_for(comm, stream_handle, name);
  check(is_send ? library().cnclSend(data, count, type, peer, comm->handle(), stream->queue)
                : library().cnclRecv(data, count, type, peer, comm->handle(), stream->queue),
        name);
}

H2_Status send(H2_Comm* comm, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("send", [&] { point_to_point(comm, true, const_cast<void*>(buffer), count, dtype, peer, stream); });
}

H2_Status recv(H2_Comm* comm, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("recv", [&] { point_to_point(comm, false, buffer, count, dtype, peer, stream); });
}

H2_Status group_start() {
  return guarded("group_start", [&] {
    check(library().cnclGroupStart(), "cnclGroupStart");
    ++group_depth;
  });
}

H2_Status group_end() {
  return guarded("group_end", [&] {
    if (group_depth == 0) fail(H2_STATUS_INVALID_ARGUMENT, "group_end without group_start");
    if (--group_depth == 0) group_stream = nullptr;
    check(library().cnclGroupEnd(), "cnclGroupEnd");
  });
}

H2_CollectiveTable make_table(const CnclLibrary& loaded) {
  return {
      .struct_size = sizeof(H2_CollectiveTable),
      .library_name = loaded.name.c_str(),
      .scope = H2_COMM_SCOPE_NETWORK,
      .unique_id_bytes = sizeof(cnclCliqueId),
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
  return h2::plugin::collective_table_of(cncl, make_table);
}

}  // namespace h2::mlu
