#include "transfer.hpp"

#include <algorithm>

namespace h2::dicomm::detail {

namespace {

constexpr size_t kSmallMessage = 4096;

size_t byte_offset(const Tensor& t) {
  return static_cast<size_t>(t.offset()) * dtype_size(t.dtype());
}

}  // namespace

size_t bytes_of(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
}

OpPtr send_in_place(Engine& engine, Link& link, int peer, uint64_t tag, const Tensor& source) {
  // Only the node transport reads exported memory. Up to 4 KiB a message is not worth the export
  // call: the smallest travel inside its command, the rest are read with process_vm_readv.
  std::optional<MemoryExport> shared;
  if (bytes_of(source) > kSmallMessage && engine.via_node(peer))
    shared = link.shared_location(*source.buffer(), byte_offset(source));
  return engine.send(peer, tag, source.data(), bytes_of(source), source.buffer(), std::move(shared));
}

int Board::add(int count, const std::shared_ptr<Event>& ready) {
  const int first = static_cast<int>(pieces.size());
  pieces.resize(pieces.size() + static_cast<size_t>(count));
  for (size_t i = static_cast<size_t>(first); i < pieces.size(); ++i) pieces[i].event = ready;
  return first;
}

Transfer::Transfer(Engine& engine, Link& link, std::shared_ptr<Board> board, std::string name, size_t window)
    : engine_(engine), link_(link), board_(std::move(board)), name_(std::move(name)), window_(window) {}

Transfer::Guard Transfer::guard(int p) const {
  return {p, sends_added_[static_cast<size_t>(p)], recvs_added_[static_cast<size_t>(p)]};
}

void Transfer::add(Send send) {
  SendState s{std::move(send)};
  sends_added_.resize(board_->pieces.size(), 0);
  recvs_added_.resize(board_->pieces.size(), 0);
  s.recvs_before = guard(s.op.piece).recvs_before;
  ++sends_added_[static_cast<size_t>(s.op.piece)];
  sends_.push_back(std::move(s));
}

void Transfer::add(Recv recv) {
  RecvState r{std::move(recv)};
  sends_added_.resize(board_->pieces.size(), 0);
  recvs_added_.resize(board_->pieces.size(), 0);
  for (int p : {r.op.piece, r.op.output_piece, r.op.then_piece}) {
    if (p < 0) continue;
    bool seen = false;
    for (int i = 0; i < r.guard_count; ++i) seen = seen || r.guards[i].piece == p;
    if (!seen) r.guards[r.guard_count++] = guard(p);
  }
  for (int i = 0; i < r.guard_count; ++i) ++recvs_added_[static_cast<size_t>(r.guards[i].piece)];
  recvs_.push_back(std::move(r));
}

std::shared_ptr<Event> Transfer::record() {
  return link_.event_after(link_.stream());
}

bool Transfer::can_post(RecvState& r) {
  for (int i = 0; i < r.guard_count; ++i) {
    const Guard& g = r.guards[i];
    const Board::Piece& p = piece(g.piece);
    if (p.sent < g.sends_before || p.landed < g.recvs_before) return false;
  }
  // The NIC writes device memory itself: device work still using the piece must finish first.
  // Staged pieces are written by a copy on DiComm's stream, which runs after that work anyway.
  return !link_.direct() || board_->event_done(r.op.piece);
}

bool Transfer::can_send(SendState& s) {
  if (piece(s.op.piece).landed < s.recvs_before) return false;
  // A staged piece is copied out on DiComm's stream, after the work that produced it.
  return !link_.direct() || board_->event_done(s.op.piece);
}

bool Transfer::advance() {
  if (predecessor_) {
    if (!predecessor_->handed_over()) return false;
    predecessor_.reset();
  }
  // What lets a peer go on comes first: landing what has arrived (its reduction feeds a send),
  // then sends. Posting a receive last: one whose message has arrived already is copied there and
  // then (shm and the node transport do), and the peer would wait for our sends meanwhile.
  bool moved = land_receives();
  moved = advance_sends() || moved;
  moved = post_receives() || moved;
  if (done_ == sends_.size() + recvs_.size()) finish();
  return moved;
}

bool Transfer::post_receives() {
  bool moved = false;
  // In order (matching follows posting order), a bounded number at a time.
  while (next_recv_ < recvs_.size() && active_recvs_ < window_) {
    RecvState& r = recvs_[next_recv_];
    if (!can_post(r)) break;
    void* target;
    if (link_.direct()) {
      target = r.op.into.data();
    } else {
      r.slot = link_.acquire();
      if (!r.slot) break;
      target = r.slot->buffer.data();
    }
    // The operation keeps its memory alive: if this transfer fails, the NIC may still write there.
    std::shared_ptr<void> keep = r.slot ? std::shared_ptr<void>(r.slot) : std::shared_ptr<void>(r.op.into.buffer());
    r.fabric_op = engine_.recv(r.op.peer, r.op.tag, target, bytes_of(r.op.into), std::move(keep));
    ++handed_;
    r.state = State::posted;
    ++next_recv_;
    ++active_recvs_;
    moved = true;
  }
  return moved;
}

bool Transfer::land_receives() {
  bool moved = false;
  for (size_t i = first_recv_; i < next_recv_; ++i) {
    RecvState& r = recvs_[i];
    if (r.state == State::posted) {
      // Land in program order, even from different peers: a reduction may read what an earlier
      // receive's reduction writes (recursive doubling's base), and the stream runs them as enqueued.
      if (!r.fabric_op->finished()) break;
      engine_.check(*r.fabric_op);
      land(r);
      --active_recvs_;
      moved = true;
    }
    // A staging slot is free once the copy out of it has run.
    if (r.state == State::landing && (!r.slot->copied || r.slot->copied->ready())) {
      link_.release(std::move(r.slot));
      r.state = State::done;
      ++done_;
      moved = true;
    }
  }
  while (first_recv_ < next_recv_ && recvs_[first_recv_].state == State::done) ++first_recv_;
  return moved;
}

void Transfer::land(RecvState& r) {
  const Recv& recv = r.op;
  Stream& stream = link_.stream();
  if (!link_.direct())
    stream.copy_from_host(*recv.into.buffer(), r.slot->buffer.data(), bytes_of(recv.into), byte_offset(recv.into));
  if (recv.reduce)
    ops::binary(stream, *recv.reduce, recv.base.defined() ? recv.base : recv.output, recv.into, recv.output);
  if (recv.then) recv.then(stream);
  std::shared_ptr<Event> event;
  if (!link_.direct() || recv.reduce || recv.then) event = record();
  for (int i = 0; i < r.guard_count; ++i) {
    Board::Piece& p = piece(r.guards[i].piece);
    ++p.landed;
    p.event = event;
  }
  if (r.slot) {
    r.slot->copied = event;
    r.state = State::landing;
  } else {
    r.state = State::done;
    ++done_;
  }
}

bool Transfer::advance_sends() {
  bool moved = false;
  // Start in order: a later piece must not overtake an earlier one to the same peer.
  while (next_send_ < sends_.size() && active_sends_ < window_) {
    SendState& s = sends_[next_send_];
    if (!can_send(s)) break;
    const Tensor& source = s.op.source;
    if (link_.direct()) {
      s.fabric_op = send_in_place(engine_, link_, s.op.peer, s.op.tag, source);
      ++handed_;
      s.state = State::posted;
    } else {
      s.slot = link_.acquire();
      if (!s.slot) break;
      // The stream orders this copy after the device work that produced the piece.
      link_.stream().copy_to_host(s.slot->buffer.data(), *source.buffer(), bytes_of(source), byte_offset(source));
      s.slot->copied = record();
      s.state = State::staging;
    }
    ++next_send_;
    ++active_sends_;
    moved = true;
  }
  // Post staged pieces in order once their copy has run.
  for (size_t i = first_send_; i < next_send_; ++i) {
    SendState& s = sends_[i];
    if (s.state != State::staging) continue;
    if (s.slot->copied && !s.slot->copied->ready()) break;
    s.fabric_op = engine_.send(s.op.peer, s.op.tag, s.slot->buffer.data(), bytes_of(s.op.source), s.slot);
    ++handed_;
    s.state = State::posted;
    moved = true;
  }
  for (size_t i = first_send_; i < next_send_; ++i) {
    SendState& s = sends_[i];
    if (s.state == State::posted && s.fabric_op->finished()) {
      engine_.check(*s.fabric_op);
      if (s.slot) link_.release(std::move(s.slot));
      ++piece(s.op.piece).sent;
      s.state = State::done;
      ++done_;
      --active_sends_;
      moved = true;
    }
  }
  while (first_send_ < next_send_ && sends_[first_send_].state == State::done) ++first_send_;
  return moved;
}

std::string Transfer::describe() const {
  for (size_t i = first_recv_; i < recvs_.size(); ++i) {
    const RecvState& r = recvs_[i];
    if (r.state == State::waiting || r.state == State::posted)
      return name_ + ": receiving " + std::to_string(bytes_of(r.op.into)) + " bytes from rank " +
             std::to_string(r.op.peer) + " (piece " + std::to_string(i + 1) + " of " + std::to_string(recvs_.size()) +
             ")";
  }
  for (size_t i = first_send_; i < sends_.size(); ++i) {
    const SendState& s = sends_[i];
    if (s.state != State::done)
      return name_ + ": sending " + std::to_string(bytes_of(s.op.source)) + " bytes to rank " +
             std::to_string(s.op.peer) + " (piece " + std::to_string(i + 1) + " of " + std::to_string(sends_.size()) +
             ")";
  }
  return name_;
}

}  // namespace h2::dicomm::detail
