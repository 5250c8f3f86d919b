#include "step.hpp"

namespace h2::dicomm::detail {

namespace {

size_t byte_offset(const Tensor& t) {
  return static_cast<size_t>(t.offset()) * dtype_size(t.dtype());
}

}  // namespace

StepTask::StepTask(Engine& engine, Link& link, std::shared_ptr<Board> board, std::optional<ops::BinaryOp> reduce,
                   std::vector<Send> sends, std::vector<Recv> recvs, std::string name, size_t window)
    : engine_(engine), link_(link), board_(std::move(board)), reduce_(reduce), name_(std::move(name)), window_(window) {
  for (Send& s : sends) sends_.push_back(SendState{std::move(s)});
  for (Recv& r : recvs) {
    if (r.piece >= 0) board_->pieces[r.piece].landed = false;
    recvs_.push_back(RecvState{std::move(r)});
  }
  if (sends_.empty() && recvs_.empty()) finish();
}

std::shared_ptr<Event> StepTask::record() {
  auto event = std::make_shared<Event>(link_.device().create_event(false));
  event->record(link_.stream());
  return event;
}

bool StepTask::advance() {
  bool moved = advance_receives();
  moved = advance_sends() || moved;
  if (done_ == sends_.size() + recvs_.size()) finish();
  return moved;
}

bool StepTask::advance_receives() {
  bool moved = false;
  // Post in order (matching follows posting order), a bounded number at a time.
  while (next_recv_ < recvs_.size() && active_recvs_ < window_) {
    RecvState& r = recvs_[next_recv_];
    void* target;
    if (link_.direct()) {
      // The NIC writes device memory itself: work still reading the destination must finish first.
      if (!r.recv.scratch.defined() && r.recv.piece >= 0) {
        const auto& before = board_->pieces[r.recv.piece].event;
        if (before && !before->ready()) break;
      }
      target = r.recv.scratch.defined() ? r.recv.scratch.data() : r.recv.destination.tensor.data();
    } else {
      r.slot = link_.acquire();
      if (!r.slot) break;
      target = r.slot->buffer.data();
    }
    // The operation keeps its memory alive: if this task fails, the NIC may still write there.
    std::shared_ptr<void> keep =
        r.slot
            ? std::shared_ptr<void>(r.slot)
            : std::shared_ptr<void>((r.recv.scratch.defined() ? r.recv.scratch : r.recv.destination.tensor).buffer());
    r.op = engine_.recv(r.recv.peer, r.recv.tag, target, r.recv.destination.bytes(), std::move(keep));
    r.state = State::posted;
    ++next_recv_;
    ++active_recvs_;
    moved = true;
  }
  for (size_t i = 0; i < next_recv_; ++i) {
    RecvState& r = recvs_[i];
    if (r.state == State::posted && r.op->finished()) {
      engine_.check(*r.op);
      land(r);
      --active_recvs_;
      moved = true;
    }
    // A staging slot is free once the copy out of it has run.
    if (r.state == State::landing && r.slot->copied->ready()) {
      link_.release(std::move(r.slot));
      r.state = State::done;
      ++done_;
      moved = true;
    }
  }
  return moved;
}

void StepTask::land(RecvState& r) {
  const Recv& recv = r.recv;
  const Tensor& into = recv.scratch.defined() ? recv.scratch : recv.destination.tensor;
  std::shared_ptr<Event> event;
  if (!link_.direct())
    link_.stream().copy_from_host(*into.buffer(), r.slot->buffer.data(), recv.destination.bytes(), byte_offset(into));
  if (recv.scratch.defined())
    ops::binary(link_.stream(), *reduce_, recv.base.defined() ? recv.base : recv.destination.tensor, recv.scratch,
                recv.destination.tensor);
  if (!link_.direct() || recv.scratch.defined()) event = record();
  if (recv.piece >= 0) {
    board_->pieces[recv.piece].landed = true;
    board_->pieces[recv.piece].event = event;
  }
  if (r.slot) {
    r.slot->copied = event;
    r.state = State::landing;
  } else {
    r.state = State::done;
    ++done_;
  }
}

bool StepTask::advance_sends() {
  bool moved = false;
  // Start in order: a later piece must not overtake an earlier one to the same peer.
  while (next_send_ < sends_.size() && active_sends_ < window_) {
    SendState& s = sends_[next_send_];
    const Span& source = s.send.source;
    if (!board_->landed(s.send.piece)) break;
    if (link_.direct()) {
      if (!board_->ready(s.send.piece)) break;
      s.op = engine_.send(s.send.peer, s.send.tag, source.tensor.data(), source.bytes(), source.tensor.buffer());
      s.state = State::posted;
    } else {
      s.slot = link_.acquire();
      if (!s.slot) break;
      // The stream orders this copy after the reduction that produced the piece.
      link_.stream().copy_to_host(s.slot->buffer.data(), *source.tensor.buffer(), source.bytes(),
                                  byte_offset(source.tensor));
      s.slot->copied = record();
      s.state = State::staging;
    }
    ++next_send_;
    ++active_sends_;
    moved = true;
  }
  // Post staged pieces in order once their copy has run.
  for (size_t i = 0; i < next_send_; ++i) {
    SendState& s = sends_[i];
    if (s.state == State::staging) {
      if (!s.slot->copied->ready()) break;
      s.op = engine_.send(s.send.peer, s.send.tag, s.slot->buffer.data(), s.send.source.bytes(), s.slot);
      s.state = State::posted;
      moved = true;
    }
  }
  for (size_t i = 0; i < next_send_; ++i) {
    SendState& s = sends_[i];
    if (s.state == State::posted && s.op->finished()) {
      engine_.check(*s.op);
      if (s.slot) link_.release(std::move(s.slot));
      s.state = State::done;
      ++done_;
      --active_sends_;
      moved = true;
    }
  }
  return moved;
}

std::string StepTask::describe() const {
  for (const RecvState& r : recvs_)
    if (r.state == State::waiting || r.state == State::posted)
      return name_ + ": receiving " + std::to_string(r.recv.destination.bytes()) + " bytes from rank " +
             std::to_string(r.recv.peer);
  for (const SendState& s : sends_)
    if (s.state != State::done)
      return name_ + ": sending " + std::to_string(s.send.source.bytes()) + " bytes to rank " +
             std::to_string(s.send.peer);
  return name_;
}

}  // namespace h2::dicomm::detail
