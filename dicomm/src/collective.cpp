#include "collective.hpp"

#include <algorithm>

namespace h2::dicomm::detail {

Layout::Layout(int64_t count_, int parts_, size_t element_bytes, size_t piece_bytes)
    : segments(parts_), count(count_), parts(parts_) {
  const int64_t per_piece = std::max<int64_t>(1, static_cast<int64_t>(piece_bytes / element_bytes));
  for (int s = 0; s < parts; ++s)
    for (int64_t b = begin(s); b < end(s); b += per_piece)
      segments[s].push_back({pieces++, b, std::min(end(s), b + per_piece)});
}

int64_t Layout::segment_begin(int64_t count, int parts, int segment) {
  const int64_t base = count / parts, extra = count % parts;
  return segment * base + std::min<int64_t>(segment, extra);
}

int64_t Layout::largest() const {
  return count / parts + (count % parts != 0);
}

Collective::Collective(CommState& comm, Stream& stream, const Device& device, std::string name)
    : comm_(comm),
      device_(device),
      link_(comm.world->link(device)),
      name_(std::move(name)),
      sequence_(comm.sequence++) {
  input_ready_ = std::make_shared<Event>(device.create_event(false));
  input_ready_->record(stream);
  link_.stream().wait(*input_ready_);
}

std::shared_ptr<Event> Collective::record() {
  auto event = std::make_shared<Event>(device_.create_event(false));
  event->record(link_.stream());
  return event;
}

std::shared_ptr<Board> Collective::board(const Layout& layout, const std::shared_ptr<Event>& ready) const {
  auto board = std::make_shared<Board>(static_cast<size_t>(layout.pieces));
  for (auto& piece : board->pieces) piece.event = ready;
  return board;
}

StepTask::Send Collective::send(int peer, const Tensor& flat, const Layout::Piece& piece) const {
  const int me = comm_.members[comm_.rank];
  return {comm_.members[peer], make_tag(TagKind::collective, comm_.id, me, sequence_),
          Span{flat.slice(0, piece.begin, piece.end)}, piece.index};
}

StepTask::Recv Collective::recv(int peer, const Tensor& flat, const Layout::Piece& piece) const {
  const int from = comm_.members[peer];
  return {from,
          make_tag(TagKind::collective, comm_.id, from, sequence_),
          Span{flat.slice(0, piece.begin, piece.end)},
          Tensor(),
          Tensor(),
          piece.index};
}

void Collective::run(const std::shared_ptr<Board>& board, std::optional<ops::BinaryOp> reduce,
                     std::vector<StepTask::Send> sends, std::vector<StepTask::Recv> recvs, const std::string& step) {
  const std::string what = name_ + " on communicator '" + comm_.name + "' (rank " + std::to_string(comm_.rank) +
                           " of " + std::to_string(size()) + "), " + step;
  auto task =
      std::make_shared<StepTask>(comm_.world->engine(), link_, board, reduce, std::move(sends), std::move(recvs), what);
  comm_.world->engine().run(task);
}

Tensor Collective::scratch(int64_t numel, DType dtype) {
  scratch_.push_back(link_.take_scratch(numel, dtype));
  return scratch_.back();
}

void Collective::finish(Stream& stream) {
  auto done = record();
  stream.wait(*done);
  for (const Tensor& t : scratch_) link_.return_scratch(t, done);
  scratch_.clear();
}

void ring_reduce_scatter(Collective& c, const Tensor& work, ops::BinaryOp op, const std::shared_ptr<Event>& ready) {
  const int n = c.size(), r = c.rank();
  const Layout layout(work.numel(), n, dtype_size(work.dtype()), c.link().piece_bytes());
  auto board = c.board(layout, ready);
  // Two halves, alternating by step: a half is reused two steps later, when the pieces reduced from
  // it have been sent on (the next step waits for that), so nothing still reads it.
  const int64_t largest = layout.largest();
  const Tensor scratch = c.scratch(2 * largest, work.dtype());
  for (int step = 0; step < n - 1; ++step) {
    const int send_segment = c.mod(r - step - 1), recv_segment = c.mod(r - step - 2);
    std::vector<StepTask::Send> sends;
    for (const auto& piece : layout.segments[send_segment]) sends.push_back(c.send(c.mod(r + 1), work, piece));
    std::vector<StepTask::Recv> recvs;
    const int64_t half = (step % 2) * largest - layout.begin(recv_segment);
    for (const auto& piece : layout.segments[recv_segment]) {
      StepTask::Recv recv = c.recv(c.mod(r - 1), work, piece);
      recv.scratch = scratch.slice(0, half + piece.begin, half + piece.end);
      recvs.push_back(std::move(recv));
    }
    c.run(board, op, std::move(sends), std::move(recvs),
          "reduce-scatter step " + std::to_string(step + 1) + "/" + std::to_string(n - 1));
  }
}

void ring_allgather(Collective& c, const Tensor& data, const std::shared_ptr<Event>& ready) {
  const int n = c.size(), r = c.rank();
  const Layout layout(data.numel(), n, dtype_size(data.dtype()), c.link().piece_bytes());
  auto board = c.board(layout, ready);
  for (int step = 0; step < n - 1; ++step) {
    const int send_segment = c.mod(r - step), recv_segment = c.mod(r - step - 1);
    std::vector<StepTask::Send> sends;
    for (const auto& piece : layout.segments[send_segment]) sends.push_back(c.send(c.mod(r + 1), data, piece));
    std::vector<StepTask::Recv> recvs;
    for (const auto& piece : layout.segments[recv_segment]) recvs.push_back(c.recv(c.mod(r - 1), data, piece));
    c.run(board, std::nullopt, std::move(sends), std::move(recvs),
          "allgather step " + std::to_string(step + 1) + "/" + std::to_string(n - 1));
  }
}

Tensor recursive_doubling_allreduce(Collective& c, const Tensor& work, ops::BinaryOp op,
                                    const std::shared_ptr<Event>& ready) {
  const int n = c.size(), r = c.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  // Two buffers: a step sends one while the partner's data is reduced into the other, so the NIC
  // never reads what a reduction is writing.
  const Layout layout(work.numel(), 1, dtype_size(work.dtype()), c.link().piece_bytes());
  const int k = layout.pieces;
  Tensor buffers[2] = {work, c.scratch(work.numel(), work.dtype())};
  // Scratch halves alternate by step for the reason ring_reduce_scatter gives.
  const int64_t count = work.numel();
  const Tensor scratch = c.scratch(2 * count, work.dtype());
  int steps = 0;
  // Board: pieces [0, k) of buffers[0], [k, 2k) of buffers[1].
  auto board = std::make_shared<Board>(static_cast<size_t>(2 * k));
  for (auto& piece : board->pieces) piece.event = ready;
  auto pieces_of = [&](int which) {
    std::vector<Layout::Piece> pieces = layout.segments[0];
    for (auto& piece : pieces) piece.index += which * k;
    return pieces;
  };
  int current = 0;
  auto send_all = [&](int peer) {
    std::vector<StepTask::Send> sends;
    for (const auto& piece : pieces_of(current)) sends.push_back(c.send(peer, buffers[current], piece));
    return sends;
  };
  // Receives the peer's buffer and reduces it with ours into the other buffer, which becomes current.
  auto exchange = [&](int peer, bool send_too, const std::string& step) {
    std::vector<StepTask::Recv> recvs;
    for (const auto& piece : pieces_of(1 - current)) {
      StepTask::Recv recv = c.recv(peer, buffers[1 - current], piece);
      const int64_t half = (steps % 2) * count;
      recv.scratch = scratch.slice(0, half + piece.begin, half + piece.end);
      recv.base = buffers[current].slice(0, piece.begin, piece.end);
      recvs.push_back(std::move(recv));
    }
    c.run(board, op, send_too ? send_all(peer) : std::vector<StepTask::Send>{}, std::move(recvs), step);
    current = 1 - current;
    ++steps;
  };
  if (r >= p) {
    // Ranks beyond the largest power of two hand their data to a partner and get the result back.
    c.run(board, std::nullopt, send_all(r - p), {}, "recursive doubling: fold");
    std::vector<StepTask::Recv> recvs;
    for (const auto& piece : pieces_of(current)) recvs.push_back(c.recv(r - p, buffers[current], piece));
    c.run(board, std::nullopt, {}, std::move(recvs), "recursive doubling: result");
  } else {
    if (r < extra) exchange(r + p, false, "recursive doubling: fold");
    for (int mask = 1; mask < p; mask <<= 1)
      exchange(r ^ mask, true, "recursive doubling: distance " + std::to_string(mask));
    if (r < extra) c.run(board, std::nullopt, send_all(r + p), {}, "recursive doubling: result");
  }
  return buffers[current];
}

void tree_broadcast(Collective& c, const Tensor& data, int root) {
  const int n = c.size(), v = c.mod(c.rank() - root);
  const Layout layout(data.numel(), 1, dtype_size(data.dtype()), c.link().piece_bytes());
  auto board = c.board(layout, c.input_ready());
  std::vector<StepTask::Recv> recvs;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      for (const auto& piece : layout.segments[0]) recvs.push_back(c.recv(c.mod(v - mask + root), data, piece));
      break;
    }
  }
  std::vector<StepTask::Send> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n)
      for (const auto& piece : layout.segments[0]) sends.push_back(c.send(c.mod(v + mask + root), data, piece));
  c.run(board, std::nullopt, std::move(sends), std::move(recvs), "broadcast (binomial tree)");
}

void chain_broadcast(Collective& c, const Tensor& data, int root) {
  const int n = c.size(), v = c.mod(c.rank() - root);
  const Layout layout(data.numel(), 1, dtype_size(data.dtype()), c.link().piece_bytes());
  auto board = c.board(layout, c.input_ready());
  std::vector<StepTask::Recv> recvs;
  std::vector<StepTask::Send> sends;
  // Each piece is forwarded as soon as it has landed, so the chain runs as a pipeline.
  if (v > 0)
    for (const auto& piece : layout.segments[0]) recvs.push_back(c.recv(c.mod(v - 1 + root), data, piece));
  if (v + 1 < n)
    for (const auto& piece : layout.segments[0]) sends.push_back(c.send(c.mod(v + 1 + root), data, piece));
  c.run(board, std::nullopt, std::move(sends), std::move(recvs), "broadcast (pipelined chain)");
}

}  // namespace h2::dicomm::detail
