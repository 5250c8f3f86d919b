#include "collective.hpp"

#include <algorithm>

namespace h2::dicomm::detail {

Layout::Layout(int64_t count_, int parts_, int64_t piece_elements)
    : segments(static_cast<size_t>(parts_)), count(count_), parts(parts_) {
  const int64_t per_piece = std::max<int64_t>(1, piece_elements);
  for (int s = 0; s < parts; ++s)
    for (int64_t b = begin(s); b < end(s); b += per_piece)
      segments[static_cast<size_t>(s)].push_back({pieces++, b, std::min(end(s), b + per_piece)});
}

int64_t Layout::segment_begin(int64_t count, int parts, int segment) {
  const int64_t base = count / parts, extra = count % parts;
  return segment * base + std::min<int64_t>(segment, extra);
}

std::pair<Tensor, int> ScratchSlots::take(int64_t numel) {
  const int slot = next++ % count;
  const int64_t begin = slot * slot_elements;
  return {region.flat.slice(0, begin, begin + numel), region.first + slot};
}

Collective::Collective(CommState& comm, Stream& stream, const Device& device, std::string name)
    : comm_(comm),
      device_(device),
      link_(comm.world->link(device)),
      name_(std::move(name)),
      sequence_(comm.sequence++),
      board_(std::make_shared<Board>()) {
  input_ready_ = link_.event_after(stream);
  if (input_ready_) link_.wait_for(*input_ready_);
  const std::string what = name_ + " on communicator '" + comm_.name + "' (rank " + std::to_string(comm_.rank) +
                           " of " + std::to_string(size()) + ")";
  transfer_ = std::make_shared<Transfer>(comm_.world->engine(), link_, board_, what, kWindow);
}

std::shared_ptr<Event> Collective::record() {
  return link_.event_after(link_.stream());
}

int64_t Collective::piece_elements(int64_t count, int parts, DType dtype) const {
  const size_t element = dtype_size(dtype);
  const auto segment_bytes = static_cast<size_t>((count + parts - 1) / parts) * element;
  // Up to eight pieces per segment make a step a pipeline. Not below an eighth of a full piece:
  // every piece costs a message, a device operation and an event, and on a machine whose ranks
  // share few cores each of those is a thread hand-off (bench/dicomm: 64 KiB pieces halved the
  // busbw of a 1 MiB allreduce).
  const size_t largest = comm_.world->piece_bytes();
  const size_t bytes = std::clamp(segment_bytes / 8, largest / 8, largest);
  return std::max<int64_t>(1, static_cast<int64_t>(bytes / element));
}

Region Collective::region(const Tensor& flat, const Layout& layout, const std::shared_ptr<Event>& ready) {
  return {flat, board_->add(layout.pieces, ready)};
}

ScratchSlots Collective::scratch_slots(int count, int64_t slot_elements, DType dtype) {
  Link::Scratch memory = link_.take_scratch(count * slot_elements, dtype);
  scratch_.push_back(memory.tensor);
  const Layout slots(count * slot_elements, count, slot_elements);
  // The NIC writes the slots: not before the last call's device work on this memory has run.
  return {region(memory.tensor, slots, memory.last_use), count, slot_elements};
}

void Collective::send(int peer, const Region& from, const Layout::Piece& piece) {
  const int me = comm_.members[static_cast<size_t>(comm_.rank)];
  transfer_->add(Transfer::Send{comm_.members[static_cast<size_t>(peer)],
                                make_tag(TagKind::collective, comm_.id, me, sequence_), from.piece(piece),
                                from.index(piece)});
}

Transfer::Recv Collective::recv(int peer, const Region& into, const Layout::Piece& piece) const {
  const int from = comm_.members[static_cast<size_t>(peer)];
  Transfer::Recv recv;
  recv.peer = from;
  recv.tag = make_tag(TagKind::collective, comm_.id, from, sequence_);
  recv.into = into.piece(piece);
  recv.piece = into.index(piece);
  return recv;
}

void Collective::run() {
  comm_.world->engine().run(transfer_);
}

Tensor Collective::scratch(int64_t numel, DType dtype) {
  scratch_.push_back(link_.take_scratch(numel, dtype).tensor);  // used on the Link's stream only
  return scratch_.back();
}

void Collective::finish(Stream& stream) {
  auto done = record();
  if (done) stream.wait(*done);
  for (const Tensor& t : scratch_) link_.return_scratch(t, done);
  scratch_.clear();
}

namespace {

// The most elements any piece of `layout` holds: the size of a scratch slot that fits each.
int64_t largest_piece(const Layout& layout) {
  int64_t most = 0;
  for (const auto& segment : layout.segments)
    for (const auto& piece : segment) most = std::max(most, piece.end - piece.begin);
  return most;
}

// Slots for the receives of a reduce-scatter over `layout`, a segment per rank (ring and recursive
// halving both receive n - 1 segments' worth): enough that the receive window never waits for a
// reduction to free one.
ScratchSlots reduction_slots(Collective& c, const Region& work, const Layout& layout) {
  size_t pieces_per_segment = 0;
  for (const auto& segment : layout.segments) pieces_per_segment = std::max(pieces_per_segment, segment.size());
  const auto receives = static_cast<int64_t>(pieces_per_segment) * (c.size() - 1);
  return c.scratch_slots(static_cast<int>(std::min<int64_t>(2 * Collective::kWindow, receives)), largest_piece(layout),
                         work.flat.dtype());
}

// Receives `peer`'s copy of `piece` into a slot and reduces it into `work`; `last`: the piece is
// then fully reduced, and `finish` (if any) finishes it.
void receive_and_reduce(Collective& c, int peer, const Region& work, const Layout::Piece& piece, ScratchSlots& slots,
                        ops::BinaryOp op, bool last, const FinishPiece& finish) {
  Transfer::Recv recv = c.recv(peer, work, piece);
  std::tie(recv.into, recv.piece) = slots.take(piece.end - piece.begin);
  recv.reduce = op;
  recv.output = work.piece(piece);
  recv.output_piece = work.index(piece);
  if (last && finish) finish(recv, piece);
  c.add(std::move(recv));
}

}  // namespace

void ring_reduce_scatter(Collective& c, const Region& work, const Layout& layout, ops::BinaryOp op,
                         const FinishPiece& finish) {
  const int n = c.size(), r = c.rank();
  ScratchSlots slots = reduction_slots(c, work, layout);
  for (int step = 0; step < n - 1; ++step) {
    // Step s sends what step s-1 reduced; each piece goes on as soon as its own reduction has run.
    const int send_segment = c.mod(r - step - 1), recv_segment = c.mod(r - step - 2);
    for (const auto& piece : layout.segments[static_cast<size_t>(send_segment)]) c.send(c.mod(r + 1), work, piece);
    for (const auto& piece : layout.segments[static_cast<size_t>(recv_segment)])
      receive_and_reduce(c, c.mod(r - 1), work, piece, slots, op, step == n - 2, finish);
  }
}

void halving_doubling_allreduce(Collective& c, const Region& work, const Region& result, const Layout& layout,
                                ops::BinaryOp op, const FinishPiece& finish) {
  const int n = c.size(), r = c.rank();
  auto for_pieces = [&](int first_segment, int segments, const auto& body) {
    for (int s = first_segment; s < first_segment + segments; ++s)
      for (const auto& piece : layout.segments[static_cast<size_t>(s)]) body(piece);
  };
  // Reduce-scatter by recursive halving, nearest partner first: each exchange keeps the half of
  // the segments this rank goes on with and hands the other half to the partner. The first
  // exchange, with the neighbour (r ^ 1), moves half the tensor, the last, with the farthest rank
  // (r ^ n/2), an n-th. Ranks are numbered node by node and island by island, so the large steps
  // stay on the fast links: on two islands of two ranks, the link between them carries a quarter of
  // the tensor each way, against half when the farthest partner comes first. This rank ends with
  // one fully reduced segment, the bit-reversed r.
  ScratchSlots slots = reduction_slots(c, work, layout);
  int first = 0, count = n;  // this rank's segments: [first, first + count)
  for (int width = 1; width < n; width *= 2) {
    count /= 2;
    const int partner = r ^ width;
    const int kept = (r & width) != 0 ? first + count : first, given = (r & width) != 0 ? first : first + count;
    for_pieces(given, count, [&](const Layout::Piece& piece) { c.send(partner, work, piece); });
    for_pieces(kept, count, [&](const Layout::Piece& piece) {
      receive_and_reduce(c, partner, work, piece, slots, op, count == 1, finish);
    });
    first = kept;
  }
  // Allgather by recursive doubling, in the reverse order: the farthest partner first, while the
  // blocks are small; each exchange trades this rank's block for the partner's, its sibling in the
  // halving, doubling it.
  for (int width = n / 2; width >= 1; width /= 2) {
    const int partner = r ^ width, theirs = (r & width) != 0 ? first - count : first + count;
    for_pieces(first, count, [&](const Layout::Piece& piece) { c.send(partner, result, piece); });
    for_pieces(theirs, count, [&](const Layout::Piece& piece) { c.add(c.recv(partner, result, piece)); });
    first = std::min(first, theirs);
    count *= 2;
  }
}

void ring_allgather(Collective& c, const Region& data, const Layout& layout) {
  const int n = c.size(), r = c.rank();
  for (int step = 0; step < n - 1; ++step) {
    const int send_segment = c.mod(r - step), recv_segment = c.mod(r - step - 1);
    for (const auto& piece : layout.segments[static_cast<size_t>(send_segment)]) c.send(c.mod(r + 1), data, piece);
    for (const auto& piece : layout.segments[static_cast<size_t>(recv_segment)])
      c.add(c.recv(c.mod(r - 1), data, piece));
  }
}

Region recursive_doubling_allreduce(Collective& c, const Region& work, const Region& other, const Layout& layout,
                                    ops::BinaryOp op) {
  const int n = c.size(), r = c.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  const auto& pieces = layout.segments[0];
  ScratchSlots slots = c.scratch_slots(static_cast<int>(2 * pieces.size()), largest_piece(layout), work.flat.dtype());
  // Two buffers: a step sends one while the partner's data is reduced into the other, so the NIC
  // never reads what a reduction is writing.
  const Region* buffers[2] = {&work, &other};
  int current = 0;
  auto send_all = [&](int peer) {
    for (const auto& piece : pieces) c.send(peer, *buffers[current], piece);
  };
  // Receives the peer's buffer and reduces it with ours into the other buffer, which becomes current.
  auto reduce_from = [&](int peer) {
    const Region& mine = *buffers[current];
    const Region& result = *buffers[1 - current];
    for (const auto& piece : pieces) {
      Transfer::Recv recv = c.recv(peer, result, piece);
      std::tie(recv.into, recv.piece) = slots.take(piece.end - piece.begin);
      recv.reduce = op;
      recv.base = mine.piece(piece);
      recv.output = result.piece(piece);
      recv.output_piece = result.index(piece);
      c.add(std::move(recv));
    }
    current = 1 - current;
  };
  if (r >= p) {
    // Ranks beyond the largest power of two hand their data to a partner and get the result back.
    send_all(r - p);
    for (const auto& piece : pieces) c.add(c.recv(r - p, *buffers[current], piece));
  } else {
    if (r < extra) reduce_from(r + p);
    for (int mask = 1; mask < p; mask <<= 1) {
      send_all(r ^ mask);
      reduce_from(r ^ mask);
    }
    if (r < extra) send_all(r + p);
  }
  return *buffers[current];
}

void tree_broadcast(Collective& c, const Region& data, const Layout& layout, int root) {
  const int n = c.size(), v = c.mod(c.rank() - root);
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      for (const auto& piece : layout.segments[0]) c.add(c.recv(c.mod(v - mask + root), data, piece));
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n)
      for (const auto& piece : layout.segments[0]) c.send(c.mod(v + mask + root), data, piece);
}

void chain_broadcast(Collective& c, const Region& data, const Layout& layout, int root) {
  const int n = c.size(), v = c.mod(c.rank() - root);
  // Each piece is forwarded as soon as it has landed, so the chain runs as a pipeline.
  for (const auto& piece : layout.segments[0]) {
    if (v > 0) c.add(c.recv(c.mod(v - 1 + root), data, piece));
    if (v + 1 < n) c.send(c.mod(v + 1 + root), data, piece);
  }
}

}  // namespace h2::dicomm::detail
