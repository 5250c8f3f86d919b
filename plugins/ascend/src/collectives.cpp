// HCCL behind the ABI's collective section. Three things HCCL does not do as the ABI asks, and what
// the plugin does instead:
// - Joining has no timeout argument (HCCL waits HCCL_CONNECT_TIMEOUT seconds): HcclCommInitRootInfo
//   runs on a helper thread, and comm_init_rank fails at `timeout_ms`; a join that ends later is
//   destroyed by that thread.
// - There is no average: MEAN divides by the rank count (aclnnDivs) on the same stream, before the
//   sum of an allreduce, after that of a reduce-scatter.
// - There is no abort: comm_abort refuses every later call and fails the streams the communicator
//   used with its reason; work already inside HCCL ends when its peer fails or at HCCL_EXEC_TIMEOUT.
// Point-to-point calls inside a group go to HcclBatchSendRecv at group_end (CANN 8.0.0 has no
// HcclGroupStart); a collective inside a group is issued in its place, after the sends and
// receives before it.
#include "collectives.hpp"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collective_checks.hpp"
#include "deadline_join.hpp"
#include "handle_registry.hpp"
#include "hccl_library.hpp"
#include "ops/device_copies.hpp"
#include "ops/tensor_ops.hpp"
#include "plugin_error.hpp"
#include "runtime.hpp"
#include "vendor_comm.hpp"
#include "vendor_library.hpp"

namespace h2::ascend {
namespace {

using h2::plugin::fail;
using h2::plugin::guarded;
using h2::plugin::require;

static_assert(sizeof(HcclRootInfo) <= H2_COMM_UNIQUE_ID_BYTES, "an HcclRootInfo must fit an H2_CommUniqueId");

using Comm = h2::plugin::VendorComm<Stream, HcclComm>;

h2::plugin::HandleRegistry<H2_Comm, Comm>& comms() {
  static h2::plugin::HandleRegistry<H2_Comm, Comm> registry("communicator");
  return registry;
}

const HcclLibrary& library() {
  return h2::plugin::required_library(hccl);
}

// Throws for anything but success, naming the call, HCCL's words for the code and AscendCL's recent
// message (where HCCL's runtime leaves its detail, for the calling thread; `detail` when the call ran
// on another).
void check(HcclResult result, const char* call, const char* detail = nullptr) {
  if (result == HCCL_SUCCESS) return;
  const char* words = library().HcclGetErrorString(result);
  if (detail == nullptr) detail = runtime().acl().aclGetRecentErrMsg();
  fail(result == HCCL_E_PARA || result == HCCL_E_PTR ? H2_STATUS_INVALID_ARGUMENT
       : result == HCCL_E_NOT_SUPPORT                ? H2_STATUS_UNSUPPORTED
       : result == HCCL_E_MEMORY                     ? H2_STATUS_OUT_OF_MEMORY
                                                     : H2_STATUS_DEVICE_ERROR,
       std::string(call) + ": HCCL error " + std::to_string(result) +
           (words != nullptr && *words ? std::string(" (") + words + ")" : "") +
           (detail != nullptr && *detail ? std::string(": ") + detail : ""));
}

HcclDataType hccl_type(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F32: return HCCL_DATA_TYPE_FP32;
    case H2_DTYPE_F16: return HCCL_DATA_TYPE_FP16;
    case H2_DTYPE_BF16: return HCCL_DATA_TYPE_BFP16;
    case H2_DTYPE_F64: return HCCL_DATA_TYPE_FP64;
    case H2_DTYPE_I32: return HCCL_DATA_TYPE_INT32;
    case H2_DTYPE_I64: return HCCL_DATA_TYPE_INT64;
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL:
      return HCCL_DATA_TYPE_UINT8;  // U8 reduced as bytes; BOOL only moved (check_collective_reduction)
    default: h2::plugin::collective_element_size(dtype);  // throws for a value that is no H2_DType
  }
  fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no HCCL type");
}

HcclReduceOp hccl_op(uint32_t dtype, uint32_t op) {
  h2::plugin::check_collective_reduction(dtype, op);
  // MEAN: a sum of the values divided by the rank count (divide_by_ranks).
  return op == H2_REDUCE_MAX ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM;
}

// `count` elements of `dtype` from `data` on the communicator's device, checked to lie in one
// allocation (HCCL would fault on anything else).
void* device_buffer(const void* data, uint64_t count, uint32_t dtype, const char* role) {
  return h2::plugin::library_buffer(data, count, dtype, role,
                                    [](const void* p, uint64_t bytes) { return runtime().is_device_memory(p, bytes); });
}

// The calls of this thread between group_start and group_end: its point-to-point items per
// communicator (in the order of each communicator's first call, the same on every rank), issued at
// group_end, or before a collective of the group, on the group's one stream.
struct Group {
  int depth = 0;
  H2_Stream* stream = nullptr;
  std::vector<std::pair<std::shared_ptr<Comm>, std::vector<HcclSendRecvItem>>> items;

  std::vector<HcclSendRecvItem>& items_of(const std::shared_ptr<Comm>& comm) {
    for (auto& [owner, list] : items)
      if (owner == comm) return list;
    return items.emplace_back(comm, std::vector<HcclSendRecvItem>{}).second;
  }
};
thread_local Group group;

// The stream `handle` names, checked against the communicator, bound, and remembered for an abort.
std::shared_ptr<Stream> stream_for(const std::shared_ptr<Comm>& comm, H2_Stream* handle, const char* name) {
  std::shared_ptr<Stream> stream = comm->use(runtime().stream(handle), name);
  runtime().bind(comm->device());
  return stream;
}

// Whether this thread is inside a group, which then takes the call (on the group's one stream).
bool joins_group(H2_Stream* handle) {
  return h2::plugin::joins_group(group.depth, group.stream, handle);
}

// Issues the sends and receives `g` kept, one HcclBatchSendRecv per communicator; every one is
// issued, and the first failure reported.
void issue_sends_and_receives(Group& g) {
  std::exception_ptr first;
  for (auto& [comm, items] : g.items) {
    try {
      auto stream = stream_for(comm, g.stream, "HcclBatchSendRecv");
      check(library().HcclBatchSendRecv(items.data(), static_cast<uint32_t>(items.size()), comm->handle(),
                                        stream->stream),
            "HcclBatchSendRecv");
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  g.items.clear();
  if (first) std::rethrow_exception(first);
}

// A collective inside a group goes after the group's sends and receives issued before it, as the
// caller wrote them (HCCL's collectives are not grouped).
void before_collective(H2_Stream* handle) {
  if (joins_group(handle)) issue_sends_and_receives(group);
}

// into = from / the rank count, for MEAN: before HCCL's sum of an allreduce (so that an f16 sum does
// not overflow where the mean fits, as NCCL's average), after it for a reduce-scatter (whose input
// is the caller's, and larger).
void divide_by_ranks(Stream& stream, const void* from, void* into, uint64_t count, uint32_t dtype, int ranks) {
  if (count > 0)
    TensorOps{stream}.divs(h2::plugin::flat_tensor(into, dtype, count), h2::plugin::flat_tensor(from, dtype, count),
                           static_cast<double>(ranks));
}

H2_Status get_unique_id(H2_CommUniqueId* id) {
  return guarded("get_unique_id", [&] {
    require(id, "id");
    std::memset(id, 0, sizeof *id);
    HcclRootInfo root;
    check(library().HcclGetRootInfo(&root), "HcclGetRootInfo");
    std::memcpy(id->bytes, &root, sizeof root);
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
    const HcclLibrary& hccl = library();
    auto root = std::make_shared<HcclRootInfo>();
    std::memcpy(root.get(), id->bytes, sizeof *root);
    const aclrtSetDeviceFn set_device = runtime().acl().aclrtSetDevice;
    const aclGetRecentErrMsgFn recent = runtime().acl().aclGetRecentErrMsg;
    auto detail = std::make_shared<std::string>();  // the helper thread's message of a failed join
    const auto timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300'000);
    HcclComm made = nullptr;
    // HCCL's bootstrap does not say which ranks it waits for.
    const int code = h2::plugin::join_by_deadline<HcclComm>(
        timeout, HCCL_SUCCESS,
        [root, set_device, recent, detail, device, nranks, rank, &hccl](HcclComm& comm) {
          const HcclResult result = set_device(device) == ACL_SUCCESS
                                        ? hccl.HcclCommInitRootInfo(static_cast<uint32_t>(nranks), root.get(),
                                                                    static_cast<uint32_t>(rank), &comm)
                                        : HCCL_E_RUNTIME;
          const char* message = result != HCCL_SUCCESS ? recent() : nullptr;
          if (message != nullptr) *detail = message;
          return result;
        },
        [&hccl](HcclComm comm) { hccl.HcclCommDestroy(comm); }, made,
        "not all " + std::to_string(nranks) + " ranks joined the HCCL communicator within " +
            std::to_string(timeout.count()) + " ms (HCCL does not say which are missing)");
    check(static_cast<HcclResult>(code), "HcclCommInitRootInfo", detail->c_str());
    *out = comms().add(std::make_shared<Comm>(hccl.name.c_str(), device, rank, nranks, made));
  });
}

H2_Status comm_abort(H2_Comm* handle, const char* reason) {
  // HCCL has no abort: later calls are refused and the streams used fail with the reason.
  return guarded("comm_abort", [&] { comms().get(handle)->abort(reason); });
}

H2_Status comm_destroy(H2_Comm* handle) {
  return guarded("comm_destroy", [&] {
    std::shared_ptr<Comm> comm = comms().take(handle);
    comm->destroyed();  // an open group holding it refuses to issue on it
    runtime().bind(comm->device());
    check(library().HcclCommDestroy(comm->handle()), "HcclCommDestroy");
  });
}

H2_Status allreduce(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                    H2_Stream* stream_handle) {
  return guarded("allreduce", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const HcclReduceOp reduce = hccl_op(dtype, op);
    const HcclDataType type = hccl_type(dtype);
    void* from = device_buffer(send, count, dtype, "send");
    void* into = device_buffer(recv, count, dtype, "recv");
    before_collective(stream_handle);
    auto stream = stream_for(comm, stream_handle, "HcclAllReduce");
    if (op == H2_REDUCE_MEAN) {
      divide_by_ranks(*stream, from, into, count, dtype, comm->size());
      from = into;
    }
    check(library().HcclAllReduce(from, into, count, type, reduce, comm->handle(), stream->stream), "HcclAllReduce");
  });
}

H2_Status reduce_scatter(H2_Comm* handle, const void* send, void* recv, uint64_t recv_count, uint32_t dtype,
                         uint32_t op, H2_Stream* stream_handle) {
  return guarded("reduce_scatter", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const HcclReduceOp reduce = hccl_op(dtype, op);
    const HcclDataType type = hccl_type(dtype);
    void* from = device_buffer(send, recv_count * static_cast<uint64_t>(comm->size()), dtype, "send");
    void* into = device_buffer(recv, recv_count, dtype, "recv");
    before_collective(stream_handle);
    auto stream = stream_for(comm, stream_handle, "HcclReduceScatter");
    check(library().HcclReduceScatter(from, into, recv_count, type, reduce, comm->handle(), stream->stream),
          "HcclReduceScatter");
    if (op == H2_REDUCE_MEAN) divide_by_ranks(*stream, into, into, recv_count, dtype, comm->size());
  });
}

H2_Status allgather(H2_Comm* handle, const void* send, void* recv, uint64_t send_count, uint32_t dtype,
                    H2_Stream* stream_handle) {
  return guarded("allgather", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const HcclDataType type = hccl_type(dtype);
    void* from = device_buffer(send, send_count, dtype, "send");
    void* into = device_buffer(recv, send_count * static_cast<uint64_t>(comm->size()), dtype, "recv");
    before_collective(stream_handle);
    auto stream = stream_for(comm, stream_handle, "HcclAllGather");
    check(library().HcclAllGather(from, into, send_count, type, comm->handle(), stream->stream), "HcclAllGather");
  });
}

H2_Status broadcast(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                    H2_Stream* stream_handle) {
  return guarded("broadcast", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    if (root < 0 || root >= comm->size())
      fail(H2_STATUS_INVALID_ARGUMENT, "root " + std::to_string(root) + " of " + std::to_string(comm->size()));
    const HcclDataType type = hccl_type(dtype);
    void* into = device_buffer(recv, count, dtype, "recv");
    const void* from = comm->rank() == root ? device_buffer(send, count, dtype, "send") : nullptr;
    before_collective(stream_handle);
    auto stream = stream_for(comm, stream_handle, "HcclBroadcast");
    // HCCL broadcasts in place: the root's data goes to its receive buffer first.
    const uint64_t bytes = count * h2::plugin::collective_element_size(dtype);
    if (from != nullptr && from != into && bytes > 0)
      copy_async(*stream, into, from, bytes, H2_MEMCPY_DEVICE_TO_DEVICE);
    check(library().HcclBroadcast(into, count, type, static_cast<uint32_t>(root), comm->handle(), stream->stream),
          "HcclBroadcast");
  });
}

// A send (`is_send`) or receive of `count` elements with `peer`: at once, or at group_end in a group.
void point_to_point(H2_Comm* handle, bool is_send, void* buffer, uint64_t count, uint32_t dtype, int32_t peer,
                    H2_Stream* stream_handle) {
  std::shared_ptr<Comm> comm = comms().get(handle);
  const HcclDataType type = hccl_type(dtype);
  h2::plugin::check_collective_peer(peer, comm->rank(), comm->size());
  void* data = device_buffer(buffer, count, dtype, "buffer");
  const char* name = is_send ? "HcclSend" : "HcclRecv";
  auto stream = stream_for(comm, stream_handle, name);
  if (joins_group(stream_handle)) {
    group.items_of(comm).push_back(
        HcclSendRecvItem{is_send ? HCCL_SEND : HCCL_RECV, data, count, type, static_cast<uint32_t>(peer)});
    return;
  }
  const auto to = static_cast<uint32_t>(peer);
  check(is_send ? library().HcclSend(data, count, type, to, comm->handle(), stream->stream)
                : library().HcclRecv(data, count, type, to, comm->handle(), stream->stream),
        name);
}

H2_Status send(H2_Comm* comm, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("send", [&] { point_to_point(comm, true, const_cast<void*>(buffer), count, dtype, peer, stream); });
}

H2_Status recv(H2_Comm* comm, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("recv", [&] { point_to_point(comm, false, buffer, count, dtype, peer, stream); });
}

H2_Status group_start() {
  return guarded("group_start", [&] { ++group.depth; });
}

H2_Status group_end() {
  return guarded("group_end", [&] {
    if (group.depth == 0) fail(H2_STATUS_INVALID_ARGUMENT, "group_end without group_start");
    if (--group.depth > 0) return;
    Group issued = std::move(group);
    group = Group{};
    issue_sends_and_receives(issued);
  });
}

H2_CollectiveTable make_table(const HcclLibrary& loaded) {
  return {
      .struct_size = sizeof(H2_CollectiveTable),
      .library_name = loaded.name.c_str(),
      .scope = H2_COMM_SCOPE_NETWORK,
      .unique_id_bytes = sizeof(HcclRootInfo),
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
  return h2::plugin::collective_table_of(hccl, make_table);
}

}  // namespace h2::ascend
