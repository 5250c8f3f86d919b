#include "engine.hpp"

#include "common/rank_list.hpp"

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sched.h>

#include <cstdio>

namespace h2::dicomm::detail {

void Backoff::pause() {
  ++idle_;
  if (idle_ < kSpins) return;  // a few free polls: completions usually arrive within microseconds
  const auto now = std::chrono::steady_clock::now();
  if (idle_ == kSpins) yielding_since_ = now;
  if (now - yielding_since_ < kYieldFor) {
    sched_yield();  // give the core to a peer rank or a device stream that shares it
    return;
  }
  // Sleeping costs a timer and a wake-up, far above a yield; only for waits already long.
  const int doublings = std::min(sleeps_++, 6);
  std::this_thread::sleep_for(std::chrono::microseconds(10 << doublings));  // 10 .. 640 µs
}

Engine::Engine(std::vector<Wire> wires, std::vector<Route> routes, std::unique_ptr<NodeTransport> node, int rank,
               std::chrono::milliseconds timeout)
    : wires_(std::move(wires)), routes_(std::move(routes)), node_(std::move(node)), rank_(rank), timeout_(timeout) {
  if (wires_.empty() || routes_.size() <= static_cast<size_t>(rank_))
    throw std::logic_error("DiComm: an Engine needs a wire and a route to every rank");
  for (Wire& wire : wires_) {
    if (wire.message_bytes > 0 && wire.label_bits == 0)
      throw std::logic_error("DiComm: cut messages need labelled parts");
    if (providers_.find(wire.fabric->provider()) == std::string::npos)
      providers_ += (providers_.empty() ? "" : ", ") + wire.fabric->provider();
  }
  for (int r = 0; r < world_size(); ++r)
    if (r != rank_ && !via_node(r)) wires_.at(routes_[static_cast<size_t>(r)].wire).has_peers = true;
  background_ = std::thread([this] { background_loop(); });
}

std::string Engine::transports() const {
  std::vector<std::vector<int>> by_wire(wires_.size());
  for (int r = 0; r < world_size(); ++r)
    if (r != rank_ && !via_node(r)) by_wire[routes_[static_cast<size_t>(r)].wire].push_back(r);
  std::string text;
  const size_t used =
      static_cast<size_t>(std::count_if(by_wire.begin(), by_wire.end(), [](auto& r) { return !r.empty(); }));
  for (size_t w = 0; w < wires_.size(); ++w) {
    if (used > 0 && by_wire[w].empty()) continue;  // a wire only for this rank's messages to itself
    text += (text.empty() ? "" : "; ") + wires_[w].fabric->network().describe();
    if (used > 1) text += " to ranks " + rank_list(by_wire[w]);
    if (used == 0) break;
  }
  const std::vector<int> node = node_peers();
  if (node.empty()) return text;
  const char* how = node_->maps_shared_memory() ? " (mapped device memory, else cma)" : " (cma)";
  return text + "; node transport" + how + " to ranks " + rank_list(node);
}

std::vector<int> Engine::node_peers() const {
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r)
    if (via_node(r)) ranks.push_back(r);
  return ranks;
}

Engine::~Engine() {
  {
    std::lock_guard lock(idle_mutex_);
    stopping_ = true;
  }
  idle_cv_.notify_all();
  background_.join();
  // Closing the endpoint drops posted operations; only then may their memory go.
  std::lock_guard lock(mutex_);
  wires_.clear();
  node_.reset();
  tasks_.clear();
  inflight_.clear();
  queued_.clear();
}

OpPtr Engine::send(int peer, uint64_t tag, const void* data, size_t bytes, std::shared_ptr<void> keep_alive,
                   std::optional<MemoryExport> shared) {
  auto op = std::make_shared<Op>();
  op->is_send = true;
  op->peer = peer;
  op->tag = tag;
  op->data = const_cast<void*>(data);
  op->bytes = bytes;
  op->keep_alive = std::move(keep_alive);
  op->shared = std::move(shared);
  return submit(std::move(op));
}

OpPtr Engine::recv(int peer, uint64_t tag, void* data, size_t bytes, std::shared_ptr<void> keep_alive) {
  auto op = std::make_shared<Op>();
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->bytes = bytes;
  op->keep_alive = std::move(keep_alive);
  return submit(std::move(op));
}

OpPtr Engine::submit(OpPtr op) {
  if (op->peer < 0 || op->peer >= world_size())
    throw CommError(CommErrorKind::usage, op->peer,
                    "DiComm: rank " + std::to_string(op->peer) + " is not in the job of " +
                        std::to_string(world_size()) + " ranks");
  throw_if_failed();
  {
    std::lock_guard lock(mutex_);
    if (!via_node(op->peer)) {
      op->wire = &wires_.at(routes_[static_cast<size_t>(op->peer)].wire);
      if (op->wire->fabric->needs_registration() && op->bytes > 0) {
        void* handle = nullptr;
        op->wire->fabric->register_memory(op->data, op->bytes, &handle);
        op->mr = handle;
      }
      op->cut(op->wire->message_bytes);
      if (op->parts > 1) op->more_contexts = std::make_unique<fi_context2[]>(op->parts - 1);
    }
    // Queue behind anything not yet posted: posting out of order would break per-tag ordering.
    queued_.push_back(op);
    pending_.fetch_add(1, std::memory_order_acq_rel);
    post_queued_locked();
  }
  return op;
}

ssize_t Engine::post_part_locked(Op& op, size_t part) {
  if (via_node(op.peer))
    return op.is_send
               ? node_->post_send(op.peer, op.data, op.bytes, op.tag, &op.context, op.shared ? &*op.shared : nullptr)
               : node_->post_recv(op.peer, op.data, op.bytes, op.tag, &op.context);
  void* data = static_cast<char*>(op.data) + part * op.part_bytes;
  void* desc = op.mr != nullptr ? fi_mr_desc(static_cast<fid_mr*>(op.mr)) : nullptr;
  Fabric& fabric = *op.wire->fabric;
  if (!op.is_send) return fabric.post_recv(data, op.part_size(part), desc, op.tag, op.context_of(part));
  const unsigned bits = op.wire->label_bits;
  const std::optional<uint64_t> label = bits > 0 ? std::optional(op.label(part).encode(bits)) : std::nullopt;
  return fabric.post_send(data, op.part_size(part), desc, routes_[static_cast<size_t>(op.peer)].address, op.tag, label,
                          op.context_of(part));
}

bool Engine::post_queued_locked() {
  bool moved = false;
  while (!queued_.empty()) {
    Op& op = *queued_.front();
    ssize_t rc = 0;
    // A part that failed while later ones waited for the provider failed the operation: post no more.
    while (!op.failing && op.posted_parts < op.parts) {
      rc = post_part_locked(op, op.posted_parts);
      if (rc != 0) break;
      inflight_.emplace(op.context_of(op.posted_parts), queued_.front());
      ++op.posted_parts;
      ++op.open_parts;
      if (op.wire != nullptr) ++op.wire->inflight;
      moved = true;
    }
    if (rc == -FI_EAGAIN) break;  // the provider needs progress first (rxm connects on demand)
    OpPtr owned = std::move(queued_.front());
    queued_.pop_front();
    moved = true;
    if (rc != 0)
      fail_op_locked(*owned, std::string(owned->is_send ? "fi_tsend to" : "fi_trecv from") + " rank " +
                                 std::to_string(owned->peer) + ": " + Fabric::error_text(rc));
    else if (!owned->failing)
      owned->state.store(OpState::posted, std::memory_order_release);
    settle_locked(*owned);
  }
  return moved;
}

void Engine::settle_locked(Op& op) {
  if (op.finished() || op.open_parts > 0 || (!op.failing && op.posted_parts < op.parts)) return;
  if (op.mr != nullptr) {
    op.wire->fabric->deregister(op.mr);
    op.mr = nullptr;
  }
  op.state.store(op.failing ? OpState::failed : OpState::done, std::memory_order_release);
  pending_.fetch_sub(1, std::memory_order_acq_rel);
}

void Engine::fail_op_locked(Op& op, std::string error) {
  op.error = std::move(error);
  op.failing = true;
  // Open parts of a receive would take parts of the next message with the tag. A part the provider
  // has begun to fill completes instead, and the operation waits for it (settle_locked).
  if (!op.is_send && op.wire != nullptr)
    for (size_t part = 0; part < op.posted_parts; ++part)
      if (inflight_.contains(op.context_of(part))) op.wire->fabric->cancel(op.context_of(part));
}

std::string receive_mismatch(const Op& op, size_t part, const Completion& completion, unsigned label_bits) {
  // Without a label (the node transport, or a provider that carries none, which never cuts) the
  // length is all there is: a shorter message would leave the rest of the tensor as it was. A
  // longer one fails in the provider as truncated.
  PartLabel got{completion.bytes, 0, 1};
  uint64_t want_bytes = op.bytes;  // as the label says it: saturated where labels are short
  bool saturated = false;
  if (completion.data && label_bits > 0) {
    got = PartLabel::decode(*completion.data);
    want_bytes = std::min<uint64_t>(op.bytes, PartLabel::bytes_limit(label_bits));
    saturated = got.message_bytes == PartLabel::bytes_limit(label_bits);
  }
  const bool same = got.message_bytes == want_bytes && got.part == part && got.parts == op.parts;
  if (same && completion.bytes == op.part_size(part)) return "";
  const std::string head =
      "receive from rank " + std::to_string(op.peer) + " expected " + std::to_string(op.bytes) + " bytes and got ";
  const std::string hint = " (do the sender's and the receiver's tensors have the same size?)";
  if (got.message_bytes != want_bytes)
    return head + "a message of " + (saturated ? "at least " : "") + std::to_string(got.message_bytes) + hint;
  if (got.part == part && got.parts == op.parts)  // equal labels, sizes apart: both above the limit
    return head + "a message whose part " + std::to_string(part + 1) + " has " + std::to_string(completion.bytes) +
           " bytes" + hint;
  return head + "part " + std::to_string(got.part + 1) + " of " + std::to_string(got.parts) +
         " of a message of that size as its part " + std::to_string(part + 1) + " of " + std::to_string(op.parts) +
         ": the messages on this tag are out of step (was an earlier one received into a tensor of another size?)";
}

void Engine::complete_locked(const Completion& completion) {
  auto it = inflight_.find(completion.context);
  if (it == inflight_.end()) return;  // not ours (cannot happen with FI_CONTEXT2 contexts)
  OpPtr op = std::move(it->second);
  inflight_.erase(it);
  if (op->wire != nullptr) --op->wire->inflight;
  --op->open_parts;
  // After a first error the rest of the parts only need to close (a cancelled one, or one the
  // provider filled meanwhile).
  if (!op->failing) {
    std::string error;
    if (completion.error != 0)
      error = std::string(op->is_send ? "send to" : "receive from") + " rank " + std::to_string(op->peer) + " (" +
              std::to_string(op->bytes) + " bytes) failed: " + completion.message;
    else if (!op->is_send)
      error = receive_mismatch(*op, op->part_of(completion.context), completion,
                               op->wire != nullptr ? op->wire->label_bits : 0);
    if (!error.empty()) fail_op_locked(*op, std::move(error));
  }
  settle_locked(*op);
}

bool Engine::progress() {
  std::unique_lock lock(mutex_, std::try_to_lock);  // another thread progressing is as good
  if (!lock.owns_lock()) return false;              // another thread is progressing right now
  if (wires_.empty()) return false;                 // closed
  bool moved = post_queued_locked();
  completions_.clear();
  // Only the wires that carry something. When every peer is on the node transport, libfabric's
  // poll took 2% of the CPU time of a 4-rank allreduce (perf), once every time round a waiter's loop.
  for (Wire& wire : wires_)
    if ((wire.has_peers || wire.inflight > 0) && wire.fabric->poll(completions_) > 0) moved = true;
  if (node_ && node_->poll(completions_) > 0) moved = true;
  for (const Completion& c : completions_) complete_locked(c);
  if (advance_tasks_locked()) moved = true;
  if (moved) post_queued_locked();
  return moved;
}

bool Engine::advance_tasks_locked() {
  bool moved = false;
  for (size_t i = 0; i < tasks_.size();) {
    Task& task = *tasks_[i];
    try {
      if (task.advance()) moved = true;
    } catch (const CommError& e) {
      task.fail(e.what(), e.peer());
    } catch (const std::exception& e) {
      task.fail(e.what(), -1);
    }
    if (task.finished()) {
      tasks_.erase(tasks_.begin() + static_cast<std::ptrdiff_t>(i));
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      moved = true;
    } else {
      ++i;
    }
  }
  return moved;
}

void Engine::add_task(std::shared_ptr<Task> task) {
  throw_if_failed();
  std::lock_guard lock(mutex_);
  tasks_.push_back(std::move(task));
  pending_.fetch_add(1, std::memory_order_acq_rel);
  // Start it at once: its first sends and receives go out now, not after the waiter's first
  // progress() has polled the fabric (a system call or more on socket providers, between one
  // message's arrival and the next send; issue 7). Every task advances, in order, so a message does
  // not overtake an earlier task's that became ready meanwhile.
  if (!wires_.empty() && advance_tasks_locked()) post_queued_locked();
}

void Engine::wait_task(const Task& task) {
  wait_until([&] { return task.finished(); }, [&] { return task.describe(); });
  if (task.failed())
    throw CommError(failed() ? CommErrorKind::peer_failed : CommErrorKind::transport, task.error_peer(), task.error());
}

void Engine::run(const std::shared_ptr<Task>& task) {
  add_task(task);
  wait_task(*task);
}

void Engine::fail(CommErrorKind kind, int peer, const std::string& message) {
  {
    std::lock_guard lock(failure_mutex_);
    if (failed_.load(std::memory_order_acquire)) return;
    failure_kind_ = kind;
    failure_peer_ = peer;
    failure_message_ = message;
    failed_.store(true, std::memory_order_release);
  }
  idle_cv_.notify_all();
}

void Engine::throw_if_failed() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failure_mutex_);
  throw CommError(failure_kind_, failure_peer_, failure_message_);
}

void Engine::check(const Op& op) const {
  // As wait_task: an operation that failed once the job had failed (a dead peer) failed for that reason.
  if (op.state.load(std::memory_order_acquire) == OpState::failed)
    throw CommError(failed() ? CommErrorKind::peer_failed : CommErrorKind::transport, op.peer, "DiComm: " + op.error);
}

std::pair<bool, std::chrono::steady_clock::time_point> Engine::wait_state() const {
  const bool waiting = waiters_.load(std::memory_order_acquire) > 0;
  return {waiting, std::chrono::steady_clock::time_point(
                       std::chrono::steady_clock::duration(wait_state_since_.load(std::memory_order_acquire)))};
}

void Engine::wait_until(const std::function<bool()>& done, const std::function<std::string()>& what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  if (waiters_.fetch_add(1, std::memory_order_acq_rel) == 0)
    wait_state_since_.store(start.time_since_epoch().count(), std::memory_order_release);
  struct Leave {
    Engine& engine;
    ~Leave() {
      const bool last = engine.waiters_.fetch_sub(1, std::memory_order_acq_rel) == 1;
      if (last)
        engine.wait_state_since_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                       std::memory_order_release);
      // The last waiter leaving work behind (an irecv still open after its isend's wait) hands it to
      // the background thread.
      if (last && engine.pending_.load(std::memory_order_acquire) > 0) engine.wake_background();
    }
  } leave{*this};
  Backoff backoff;
  while (!done()) {
    throw_if_failed();
    if (progress()) {
      backoff.reset();
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // Which rank never came, where the World can tell (a rank that hangs outside DiComm still
      // pings the store, so only its wait state gives it away).
      std::pair<int, std::string> blame{-1, ""};
      if (diagnose_timeout_) {
        try {
          blame = diagnose_timeout_();
        } catch (const std::exception& e) {
          blame.second = std::string("; the rendezvous store could not say which rank is missing: ") + e.what();
        }
      }
      const std::string message = "DiComm: timed out after " + std::to_string(timeout_.count() / 1000.0).substr(0, 5) +
                                  " s waiting for " + what() + " (H2_DICOMM_TIMEOUT sets the limit)" + blame.second;
      // Operations are left in flight: nothing after this can be trusted, and closing the World
      // must not wait for its peers once more (the finalize barrier would wait out another timeout).
      fail(CommErrorKind::timeout, blame.first, message);
      throw CommError(CommErrorKind::timeout, blame.first, message);
    }
    backoff.pause();
  }
}

void Engine::wait(const OpPtr& op, const std::function<std::string()>& what) {
  try {
    wait_until([&] { return op->finished(); }, what);
  } catch (const CommError& e) {
    // A failed operation ends only once none of its parts is open (settle_locked); where one never
    // closes (a send part the peer does not take), its own error says more than the timeout.
    if (e.kind() != CommErrorKind::timeout) throw;
    std::lock_guard lock(mutex_);
    if (!op->failing) throw;
    throw CommError(CommErrorKind::transport, op->peer,
                    "DiComm: " + op->error + " (and a part of it was still open when the wait timed out)");
  }
  check(*op);
}

void Engine::wake_background() {
  { std::lock_guard lock(idle_mutex_); }  // the thread is either before its check or inside the wait
  idle_cv_.notify_one();
}

void Engine::background_loop() {
  Backoff backoff;
  for (;;) {
    {
      std::unique_lock lock(idle_mutex_);
      // Sleep while there is nothing to move or a waiter is moving it already. Work the caller will
      // not wait for at once (isend, irecv, a waiter leaving work behind) wakes this thread; blocking
      // calls do not, as a wake-up per message (a futex call and a context switch each way) cost
      // more than the message itself on shm. The tick is a backstop: at the 1 ms it used to be, every
      // rank woke a thousand times a second whether or not it communicated, on cores its own and its
      // peers' compute needs.
      idle_cv_.wait_for(lock, kBackgroundTick, [&] {
        return stopping_ || (pending_.load(std::memory_order_acquire) > 0 &&
                             waiters_.load(std::memory_order_acquire) == 0 && !failed_.load());
      });
      if (stopping_) return;
      if (pending_.load() == 0 || waiters_.load() > 0 || failed_.load()) continue;
    }
    if (progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace h2::dicomm::detail
