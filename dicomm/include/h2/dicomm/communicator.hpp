// DiComm's communicators: point-to-point and collectives on h2::Tensor from any plugin, between
// ranks that may run different vendors' devices, over libfabric.
//
//   auto world = h2::dicomm::Communicator::world();          // bootstrap from the environment
//   world.allreduce(stream, grads, h2::dicomm::ReduceOp::avg);
//   auto dp = world.split(replica_stage, world.rank());      // sub-communicators by colour
//   auto request = world.isend(stream, activations, next_stage);  ... request.wait();
//
// Stream semantics: a call sees the work enqueued on `stream` before it, and work enqueued on
// `stream` after a blocking call (or after Request::wait) sees its result. Tensors must be
// contiguous. Every call of a communicator is collective over its ranks except send/recv, and ranks
// must issue collectives in the same order with matching arguments.
//
// Transport: ranks on one node that may read each other's memory (cross-memory attach) exchange
// messages through DiComm's node transport, the rest through libfabric (H2_DICOMM_NODE_TRANSPORT:
// auto, the default, unless H2_FABRIC_PROVIDER names a provider; cma; off).
//
// Memory path, per rank and device: when the device declares memory a NIC may use directly
// (H2_NIC_DIRECT_HOST and host-accessible: the cpu-reference plugin), the fabric reads and writes
// device memory itself; otherwise DiComm stages every piece through pinned host buffers of the
// device's plugin, several pieces in flight so device copies overlap the wire. Reductions always run
// on the device, through the core's operators; fp16 and bf16 are reduced in fp32 and rounded once.
//
// Hierarchy: where the ranks form islands joined by slow links, or span plugins whose collective
// libraries DiComm may use (H2_DICOMM_VENDOR_COLLECTIVES), a collective runs as steps inside each
// group (DiComm's, or the group's library) and between the groups, so the slow links carry a shard
// per rank rather than the whole tensor.
//
// Failures: every wait ends within the communicator's timeout (H2_DICOMM_TIMEOUT, seconds; default
// 300). When another rank dies or aborts, every pending and later call on every communicator of
// this process throws a CommError naming that rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "h2/dicomm/error.hpp"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::dicomm {

enum class ReduceOp { sum, avg, max };
const char* reduce_op_name(ReduceOp op);

// How a reduction of f16 or bf16 data travels. wide: partial results go as f32 and are rounded once
// at the end (as accurate as f32, the default). narrow: they go in the data's own 16 bits, each
// receiver adding in f32 and rounding once per step (half the reduce-scatter's bytes, as NCCL's
// 16-bit reductions; for gradients, where the bytes matter more than the last bits).
enum class Accumulation { wide, narrow };

struct CommOptions {
  // 0: H2_DICOMM_TIMEOUT (seconds) or 300 s.
  std::chrono::milliseconds timeout{0};
  // "": H2_FABRIC_PROVIDER, else chosen automatically (shm on one node; verbs, efa, cxi; tcp).
  std::string provider;
};

class Communicator;
namespace detail {
struct CommState;
struct RequestState;
// A Communicator over DiComm's state of one: for the steps of its hierarchical collectives.
Communicator communicator_over(std::shared_ptr<CommState> state);
}  // namespace detail

// An asynchronous operation. Dropping a Request does not cancel the operation: it completes in the
// background while its tensor stays alive. The stream it was issued on must outlive it.
class Request {
 public:
  Request() = default;
  // True once complete; throws the operation's CommError if it failed.
  bool test();
  // Blocks until complete (or throws CommError: timeout, failed peer, transport error).
  void wait();

 private:
  friend class Communicator;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::RequestState> state_;
};

class Communicator {
 public:
  Communicator() = default;  // invalid: not a member of any group (split with a negative colour)

  // Joins the job the environment describes (see bootstrap.hpp): connects to the rendezvous store,
  // agrees on a libfabric provider with every rank, exchanges endpoint addresses. Collective over
  // the whole job; throws h2::Error naming what failed (store unreachable, wrong token, providers
  // that differ between ranks, ...).
  static Communicator world(const CommOptions& options = {});

  bool valid() const { return state_ != nullptr; }
  int rank() const;
  int size() const;
  // The rank of this communicator's rank `r` in the world.
  int world_rank(int r) const;
  const std::string& name() const;      // "world", "world/split(1)"
  const std::string& provider() const;  // libfabric provider in use, "tcp;ofi_rxm"
  // Every transport this rank uses: "shm; node transport (cma) to ranks 1,2,3" (ranks of this
  // node whose memory it reads directly; libfabric carries the rest).
  std::string transport() const;
  // How this communicator's collectives have run so far, in words: on DiComm's own algorithms, on
  // the plugin's collective library ("cpu-reference shared memory"), or hierarchically over plugin
  // groups or islands above H2_DICOMM_SMALL_BYTES. Decided at the first collective (islands at the
  // first large one), so before them it says what is still open.
  std::string collectives() const;

  // Ranks with the same `color` form a new communicator, ordered by `key` then by rank. A negative
  // colour returns an invalid communicator. Collective over this communicator.
  Communicator split(int color, int key) const;

  // Point-to-point. Messages between two ranks with the same tag arrive in the order sent.
  Request isend(Stream& stream, const Tensor& tensor, int peer, uint32_t tag = 0) const;
  Request irecv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag = 0) const;
  void send(Stream& stream, const Tensor& tensor, int peer, uint32_t tag = 0) const;
  void recv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag = 0) const;

  // In place: every rank ends with the reduction over all ranks (bit-identical on every rank).
  void allreduce(Stream& stream, const Tensor& tensor, ReduceOp op = ReduceOp::sum,
                 Accumulation accumulation = Accumulation::wide) const;
  // input: size()*N elements; output: N elements, the reduction of block rank() of every input.
  void reduce_scatter(Stream& stream, const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::sum,
                      Accumulation accumulation = Accumulation::wide) const;
  // input: N elements; output: size()*N elements, block r from rank r.
  void allgather(Stream& stream, const Tensor& input, const Tensor& output) const;
  // `tensor` on `root` is copied to every rank's `tensor`.
  void broadcast(Stream& stream, const Tensor& tensor, int root) const;
  void barrier() const;

  // Fails every pending and later operation of every rank of the job with "rank R aborted: reason".
  void abort(const std::string& reason) const;
  // After `error` stopped this rank: aborts with its message, unless it is the news of another rank's
  // failure or of an abort, which every rank has had already. What only this rank saw (a timeout
  // naming a rank that never came, a transport error, its own bug) reaches the others at once, so
  // that none of them waits out its own timeout first.
  void abort_after(const std::exception& error) const;

 private:
  friend Communicator detail::communicator_over(std::shared_ptr<detail::CommState> state);
  explicit Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}
  const detail::CommState& state() const;
  // isend / irecv without waking DiComm's background thread: for send / recv, which wait at once.
  Request start_send(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const;
  Request start_recv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const;
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace h2::dicomm
