// Reduce-scatter and allgather over groups of several sizes. With groups of one size, rank i of
// every group meets the others' rank i between the groups; with sizes that differ there is no such
// pairing, so each rank's segment holds its own block and a slice of the other groups' blocks
// (islands.hpp's block_layout), and the slices' pieces travel point to point between the slice's
// holder and the block's owner. Between the groups, a group of m among N ranks then sends its sums
// of the other groups' blocks once, (N - m) blocks in all: what a hierarchy over groups of one size
// sends too; a flat ring sends every block past every rank.
#include <vector>

#include "collectives/hierarchy_steps.hpp"
#include "h2/ops.hpp"

namespace h2::dicomm::detail {

namespace {

// A piece of this rank's block that another group's slice holds.
struct HeldPiece {
  size_t group;  // the holder's group
  int holder;    // the rank whose slice holds it
  OutsidePiece piece;
};

// The pieces of rank `rank`'s block that the other groups' slices hold, in group then place order.
std::vector<HeldPiece> pieces_of_block(const Hierarchy& h, int rank, int64_t block) {
  std::vector<HeldPiece> found;
  for (size_t g = 0; g < h.groups.size(); ++g) {
    if (g == h.place.group) continue;
    const BlockLayout layout = block_layout(h.groups, g, block);
    for (size_t place = 0; place < layout.slices.size(); ++place)
      for (const OutsidePiece& piece : layout.slices[place])
        if (piece.owner == rank) found.push_back({g, h.groups[g][place], piece});
  }
  return found;
}

// Calls `stretch(in_rank_order, in_segments, length)` for every stretch of this rank's group's
// segments: each place's own block, then its slice's pieces. `in_rank_order` is the element where
// the stretch lies in a tensor of every rank's block in rank order (block r from r * block), and
// `in_segments` where it lies in the group's segments, one after the other.
template <typename Stretch>
void for_each_stretch(const Hierarchy& h, const BlockLayout& layout, int64_t block, Stretch stretch) {
  const std::vector<int>& group = h.groups[h.place.group];
  for (size_t place = 0; place < group.size(); ++place) {
    const int64_t at = static_cast<int64_t>(place) * layout.segment;
    stretch(group[place] * block, at, block);
    for (const OutsidePiece& piece : layout.slices[place])
      stretch(piece.owner * block + piece.in_block, at + block + piece.in_slice, piece.length);
  }
}

void wait_all(std::vector<Request>& requests) {
  for (Request& request : requests) request.wait();
}

}  // namespace

void reduce_scatter_over_sizes(CommState& s, Hierarchy& h, Steps& steps, Stream& stream, const Tensor& input,
                               const Tensor& output, ReduceOp op, Accumulation accumulation) {
  const int64_t n = output.numel();
  if (n == 0) return;
  const BlockLayout layout = block_layout(h.groups, h.place.group, n);
  const int64_t segment = layout.segment;
  Temporaries temporaries(s, stream, input.device());
  // 16-bit data is summed in f32 where the caller asks for wide accumulation, as DiComm's flat
  // algorithms do: inside, between the groups and at the owner, rounded once at the end.
  const bool widen =
      accumulation == Accumulation::wide && (input.dtype() == DType::f16 || input.dtype() == DType::bf16);
  const DType work = widen ? DType::f32 : input.dtype();
  Tensor source = input;
  if (widen) {
    source = temporaries.make(input.numel(), work);
    ops::copy(stream, input, source);
  }
  // Every place's segment: its block, its slice of the outside blocks, padding (zeros, summed and
  // dropped).
  const Tensor ordered = temporaries.make(h.place.size * segment, work);
  for_each_stretch(h, layout, n, [&](int64_t in_rank_order, int64_t in_segments, int64_t length) {
    copy_elements(stream, source, in_rank_order, ordered, in_segments, length);
  });
  for (size_t place = 0; place < layout.slices.size(); ++place) {
    int64_t used = n;
    for (const OutsidePiece& piece : layout.slices[place]) used += piece.length;
    const int64_t at = static_cast<int64_t>(place) * segment;
    if (used < segment) ops::fill(stream, ordered.slice(0, at + used, at + segment), 0.0);
  }
  // An average is a sum divided once at the owner, except for 16-bit sums that stay 16-bit: each
  // contribution is divided first there, so that no partial sum grows past the dtype's range.
  const ReduceOp combined = op == ReduceOp::max ? ReduceOp::max : ReduceOp::sum;
  const bool divide_first = op == ReduceOp::avg && work != DType::f32 && work != DType::f64;
  const double ranks = static_cast<double>(s.members.size());
  if (divide_first) ops::binary(stream, ops::BinaryOp::div, ordered, ranks, ordered);
  const Tensor mine = ordered.slice(0, h.place.rank * segment, (h.place.rank + 1) * segment);
  if (h.place.size > 1) steps.reduce_scatter_inside(ordered, mine, combined, accumulation);

  // Between the groups: this rank's slice to the blocks' owners; the other groups' sums of this
  // rank's block, one tensor per group, from the ranks whose slices hold them.
  std::vector<Tensor> sums(h.groups.size());
  std::vector<Request> requests;
  const Communicator exchange = steps.exchange();
  for (const auto& [group, holder, piece] : pieces_of_block(h, s.rank, n)) {
    Tensor& sum = sums[group];
    if (!sum.defined()) sum = temporaries.make(n, work);
    requests.push_back(exchange.irecv(stream, sum.slice(0, piece.in_block, piece.in_block + piece.length), holder));
  }
  for (const OutsidePiece& piece : layout.slices[static_cast<size_t>(h.place.rank)])
    requests.push_back(
        exchange.isend(stream, mine.slice(0, n + piece.in_slice, n + piece.in_slice + piece.length), piece.owner));
  wait_all(requests);
  // This group's sum of the block, then every other group's, in group order.
  const ops::BinaryOp add = op == ReduceOp::max ? ops::BinaryOp::maximum : ops::BinaryOp::add;
  const Tensor result = widen ? temporaries.make(n, work) : output;
  Tensor so_far = mine.slice(0, 0, n);
  for (const Tensor& sum : sums) {
    if (!sum.defined()) continue;
    ops::binary(stream, add, so_far, sum, result);
    so_far = result;
  }
  if (op == ReduceOp::avg && !divide_first) {
    ops::binary(stream, ops::BinaryOp::div, so_far, ranks, result);
    so_far = result;
  }
  if (!so_far.same_view(output)) ops::copy(stream, so_far, output);
}

void allgather_over_sizes(CommState& s, Hierarchy& h, Steps& steps, Stream& stream, const Tensor& input,
                          const Tensor& output) {
  const int64_t n = input.numel();
  if (n == 0) return;
  const BlockLayout layout = block_layout(h.groups, h.place.group, n);
  const int64_t segment = layout.segment;
  Temporaries temporaries(s, stream, output.device());
  const Tensor ordered = temporaries.make(h.place.size * segment, output.dtype());
  const Tensor mine = ordered.slice(0, h.place.rank * segment, (h.place.rank + 1) * segment);
  copy_elements(stream, input, 0, mine, 0, n);

  // Between the groups: this rank's slice from the blocks' owners; this rank's block to the other
  // groups' ranks whose slices hold it.
  std::vector<Request> requests;
  const Communicator exchange = steps.exchange();
  for (const OutsidePiece& piece : layout.slices[static_cast<size_t>(h.place.rank)])
    requests.push_back(
        exchange.irecv(stream, mine.slice(0, n + piece.in_slice, n + piece.in_slice + piece.length), piece.owner));
  for (const auto& [group, holder, piece] : pieces_of_block(h, s.rank, n))
    requests.push_back(exchange.isend(stream, input.slice(0, piece.in_block, piece.in_block + piece.length), holder));
  wait_all(requests);

  // Inside, then every block to its place in rank order. The padding travels and is dropped.
  if (h.place.size > 1) steps.allgather_inside(mine, ordered);
  for_each_stretch(h, layout, n, [&](int64_t in_rank_order, int64_t in_segments, int64_t length) {
    copy_elements(stream, ordered, in_segments, output, in_rank_order, length);
  });
}

}  // namespace h2::dicomm::detail
