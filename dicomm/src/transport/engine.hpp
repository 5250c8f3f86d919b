// The progress engine: posts tagged sends and receives on the fabric, reads completions, and makes
// waiting threads either see their operation complete or throw a CommError (timeout, dead peer,
// abort, transport error) — never hang.
//
// Threading: any thread may submit and wait. Fabric calls are serialised by one mutex (the endpoint
// is FI_THREAD_DOMAIN). Whoever waits drives progress itself; a background thread drives it only
// while operations are pending and nobody waits (an isend left running while the caller computes):
// isend, irecv and a waiter that leaves work behind wake it.
// Waiting spins briefly, then yields, then sleeps with growing intervals: ranks often outnumber
// cores, and busy polling there is 20x slower.
#pragma once

#include <rdma/fabric.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fabric.hpp"
#include "h2/dicomm/error.hpp"
#include "node_transport.hpp"
#include "task.hpp"

namespace h2::dicomm::detail {

enum class OpState { queued, posted, done, failed };

// What every fabric message carries as immediate data where the provider can (Fabric::label_bits):
// which part of its message this is, of how many, and the message's bytes. A receive checks each of
// its parts against it, so a message of another size fails by name, and so does a receive that a
// size mismatch before it left out of step with its tag's messages, where part sizes alone could
// fit (the back half of an earlier message). Part and parts take 4 bits each (kMaxParts is 16);
// the bytes take the rest, 56 bits, or 24 where a provider carries 32 (verbs;ofi_rxm), saturating at
// 16 MiB - 1 there. The sizes still cannot differ unnoticed: a receive whose every part holds the
// same part of a message with as many parts, each of the size it expects, received that whole
// message, of its own size.
struct PartLabel {
  uint64_t message_bytes = 0;
  size_t part = 0;
  size_t parts = 1;

  static constexpr size_t kMaxParts = 16;  // part and parts - 1 take 4 bits each
  // Where the bytes saturate in a label of `bits`.
  static uint64_t bytes_limit(unsigned bits) { return (uint64_t{1} << (bits - 8)) - 1; }
  uint64_t encode(unsigned bits) const {
    return std::min(message_bytes, bytes_limit(bits)) << 8 | (parts - 1) << 4 | part;
  }
  static PartLabel decode(uint64_t data) { return {data >> 8, data & 15, (data >> 4 & 15) + 1}; }
};

struct Wire;

struct Op {
  fi_context2 context{};  // part 0's; completions carry its address; must stay the first member
  bool is_send = false;
  int peer = -1;  // world rank
  uint64_t tag = 0;
  void* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<void> keep_alive;    // what owns data until the operation is over
  std::optional<MemoryExport> shared;  // sends: where data lies in exported device memory
  void* mr = nullptr;                  // registration, when the provider needs FI_MR_LOCAL
  std::atomic<OpState> state{OpState::queued};
  std::string error;  // the first error; set before state becomes failed
  // Set with `error`: no further part is posted, and the operation fails once none is open (Engine::
  // settle_locked), so that a caller who sees the failure knows nothing touches its memory any more.
  bool failing = false;

  // On the fabric, a message above the Engine's message size goes as `parts` messages of
  // `part_bytes` (the last one the rest), posted back to back with one tag: they match in order.
  // A receive whose part fails cancels its other open parts. The sender's parts they did not take
  // stay with the tag, and the next receive on it fails on their labels.
  size_t parts = 1;
  size_t part_bytes = 0;
  std::unique_ptr<fi_context2[]> more_contexts;  // parts 1 ..; part 0 posts with `context`
  Wire* wire = nullptr;                          // the fabric it goes on; null on the node transport
  size_t posted_parts = 0;
  size_t open_parts = 0;  // posted, not yet completed

  void* context_of(size_t part) { return part == 0 ? static_cast<void*>(&context) : &more_contexts[part - 1]; }
  size_t part_of(const void* part_context) const {
    return part_context == &context
               ? 0
               : static_cast<size_t>(static_cast<const fi_context2*>(part_context) - more_contexts.get()) + 1;
  }
  size_t part_size(size_t part) const { return parts == 1 ? bytes : std::min(part_bytes, bytes - part * part_bytes); }
  PartLabel label(size_t part) const { return {bytes, part, parts}; }
  // Sets parts and part_bytes for the Engine's message size (0: never cut). At most
  // PartLabel::kMaxParts parts: a provider's queues hold about a thousand posted operations (shm:
  // 1024; beyond, fi_trecv fails with ENOMEM), and a transfer keeps several pieces in flight.
  void cut(size_t message_bytes) {
    if (message_bytes == 0 || bytes <= message_bytes) return;
    part_bytes = std::max(message_bytes, (bytes + PartLabel::kMaxParts - 1) / PartLabel::kMaxParts);
    parts = (bytes + part_bytes - 1) / part_bytes;
  }

  bool finished() const {
    const OpState s = state.load(std::memory_order_acquire);
    return s == OpState::done || s == OpState::failed;
  }
};
using OpPtr = std::shared_ptr<Op>;

// The error of part `part` of the receive `op` that landed other than posted, or "": `completion`
// is the part's, carrying a PartLabel of `label_bits` (0: none) where the sender sent one.
std::string receive_mismatch(const Op& op, size_t part, const Completion& completion, unsigned label_bits);

// One libfabric endpoint the Engine sends on: a network of routes.hpp, and how messages on it are cut.
struct Wire {
  std::unique_ptr<Fabric> fabric;
  // The size fabric messages are cut into (0: never cut; larger parts where that would make more
  // than PartLabel::kMaxParts); the same at both ends of every link on it.
  size_t message_bytes = 0;
  unsigned label_bits = 0;  // the bits of a PartLabel its messages carry (Fabric::label_bits); 0: none
  bool has_peers = false;   // some other rank is reached through it
  size_t inflight = 0;      // operations posted to it
};

// Where messages to one rank go: a wire (an index into the Engine's wires) and the rank's address on it.
struct Route {
  size_t wire = 0;
  fi_addr_t address = FI_ADDR_NOTAVAIL;
};

class Engine {
 public:
  // `node` (may be null) carries the messages to the ranks it is enabled for, `wires` the rest:
  // `routes` (one per rank, this one's own included: a rank's messages to itself go on a wire)
  // says which wire and address.
  Engine(std::vector<Wire> wires, std::vector<Route> routes, std::unique_ptr<NodeTransport> node, int rank,
         std::chrono::milliseconds timeout);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(routes_.size()); }
  // The libfabric providers in use, "tcp;ofi_rxm" or "verbs;ofi_rxm, tcp;ofi_rxm".
  const std::string& provider() const { return providers_; }
  // The world ranks reached through the node transport.
  std::vector<int> node_peers() const;
  // "tcp;ofi_rxm on eth0; node transport (cma) to ranks 1,3", or with several networks
  // "verbs;ofi_rxm on mlx5_0 to ranks 1; tcp;ofi_rxm on eth0 to ranks 2,3".
  std::string transports() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Queue a send / receive of `bytes` at `data` (host-addressable memory the NIC may read or write)
  // to / from world rank `peer`. Operations to one peer with one tag complete in the order posted.
  // `shared`: where `data` lies in exported device memory, for a peer on the node transport.
  OpPtr send(int peer, uint64_t tag, const void* data, size_t bytes, std::shared_ptr<void> keep_alive = {},
             std::optional<MemoryExport> shared = {});
  OpPtr recv(int peer, uint64_t tag, void* data, size_t bytes, std::shared_ptr<void> keep_alive = {});

  // Whether messages to world rank `peer` go through the node transport (which may read a sender's
  // exported memory), not libfabric.
  bool via_node(int peer) const { return node_ && node_->enabled(peer); }
  // Nothing of this process's is queued, in flight or running: an operation submitted now cannot
  // overtake an earlier one.
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Posts queued operations, reads completions and advances the tasks once. True when anything moved.
  bool progress();
  // Operations were handed to the caller without a wait (isend, irecv): the background thread moves
  // them while the caller does other work. Blocking calls do not call it: their waiter moves them.
  void wake_background();
  // Advances `task` from progress() until it finishes (successfully or not).
  void add_task(std::shared_ptr<Task> task);
  // Waits until `task` (already added) finishes; throws CommError when it failed (or as wait_until does).
  void wait_task(const Task& task);
  // add_task, then wait_task.
  void run(const std::shared_ptr<Task>& task);

  // Blocks until done() is true, driving progress. Throws CommError when the job failed, this rank
  // aborted, the deadline passed (`what()` then describes what was awaited), or an operation in
  // `watch` failed.
  void wait_until(const std::function<bool()>& done, const std::function<std::string()>& what);
  void wait(const OpPtr& op, const std::function<std::string()>& what);
  // Throws if `op` failed.
  void check(const Op& op) const;

  // Whether a thread is inside wait_until (waiting for peers), and since when that has been so.
  // Lock-free: the store's heartbeat reads it.
  std::pair<bool, std::chrono::steady_clock::time_point> wait_state() const;
  // What a wait that times out adds to its message, and the peer it blames (< 0: none): the World
  // asks the store which rank is not waiting. Called on the timed-out thread; may block briefly.
  void set_timeout_diagnosis(std::function<std::pair<int, std::string>()> diagnose) {
    diagnose_timeout_ = std::move(diagnose);
  }

  // From now on every wait throws this failure (first failure wins). `peer` < 0: not a peer's.
  void fail(CommErrorKind kind, int peer, const std::string& message);
  // Throws the recorded failure, if any.
  void throw_if_failed() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }

 private:
  OpPtr submit(OpPtr op);
  bool post_queued_locked();
  // Posts part `part` of `op` to the node transport or the fabric; the provider's return code.
  ssize_t post_part_locked(Op& op, size_t part);
  // Records `error` as `op`'s failure (Op::failing) and cancels its receive parts still open.
  void fail_op_locked(Op& op, std::string error);
  // Ends `op` once none of its parts is open and none will be posted: done, or failed with the
  // error recorded; drops its registration then.
  void settle_locked(Op& op);
  // Advances every task once, in order, and drops the finished ones. True when anything moved.
  bool advance_tasks_locked();
  void complete_locked(const Completion& completion);
  void background_loop();

  std::vector<Wire> wires_;  // emptied when the Engine closes
  std::vector<Route> routes_;
  std::unique_ptr<NodeTransport> node_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::string providers_;

  // Guards wires_, node_, queued_, inflight_ and tasks_. Recursive: tasks advanced under it submit operations.
  std::recursive_mutex mutex_;
  std::deque<OpPtr> queued_;
  std::vector<std::shared_ptr<Task>> tasks_;
  std::unordered_map<void*, OpPtr> inflight_;
  std::vector<Completion> completions_;
  std::atomic<int> pending_{0};  // queued + in flight operations + running tasks
  std::atomic<int> waiters_{0};
  // When waiters_ last went from 0 to 1 or back (steady clock, ns): see wait_state().
  std::atomic<std::chrono::steady_clock::rep> wait_state_since_{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  std::function<std::pair<int, std::string>()> diagnose_timeout_;  // set before any wait

  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mutex_;
  CommErrorKind failure_kind_ = CommErrorKind::transport;
  int failure_peer_ = -1;
  std::string failure_message_;

  static constexpr std::chrono::milliseconds kBackgroundTick{50};  // a backstop only
  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::thread background_;
};

// What a waiter does when nothing moved: spin a few polls, then yield the core for up to
// kYieldFor (a peer rank or DiComm's own device stream may need it; a message or a reduction
// usually lands within that), then sleep 10 µs doubling to 640 µs, so that a long wait (a slow
// pipeline stage, a straggler) does not burn a core.
class Backoff {
 public:
  void reset() { idle_ = sleeps_ = 0; }
  void pause();

  static constexpr int kSpins = 32;
  static constexpr std::chrono::microseconds kYieldFor{2000};

 private:
  int idle_ = 0, sleeps_ = 0;
  std::chrono::steady_clock::time_point yielding_since_;
};

}  // namespace h2::dicomm::detail
