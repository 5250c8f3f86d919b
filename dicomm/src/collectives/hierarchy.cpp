#include "hierarchy.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <numeric>

#include "collectives/hierarchy_steps.hpp"
#include "collectives/vendor_path.hpp"
#include "h2/dicomm/error.hpp"
#include "h2/log.hpp"
#include "h2/ops.hpp"

namespace h2::dicomm::detail {

namespace {

// The communicator rank whose block goes k-th when blocks are ordered place by place: every group's
// rank 0 in group order, then every group's rank 1, ... A reduce-scatter inside the groups over
// blocks in this order, then one between them, leaves every rank its own block (groups of one size).
std::vector<int> place_order(Hierarchy& h) {
  std::vector<int> order;
  for (int i = 0; i < h.place.size; ++i)
    for (const std::vector<int>& group : h.groups) order.push_back(group[static_cast<size_t>(i)]);
  return order;
}

bool in_rank_order(const std::vector<int>& order) {
  for (size_t k = 0; k < order.size(); ++k)
    if (order[k] != static_cast<int>(k)) return false;
  return true;
}

// Sum (or max) inside the group, between the groups' first ranks, broadcast inside: for the last
// elements that the groups' sizes cannot cut evenly (all of them where those sizes have no
// pieces). An average scales
// each contribution first, so that no partial sum of f16 grows past its range.
void allreduce_through_first_ranks(CommState& s, Hierarchy& h, Steps& steps, Stream& stream, const Tensor& data,
                                   ReduceOp op, Accumulation accumulation) {
  if (op == ReduceOp::avg) ops::binary(stream, ops::BinaryOp::div, data, static_cast<double>(s.members.size()), data);
  const ReduceOp sum = op == ReduceOp::max ? ReduceOp::max : ReduceOp::sum;
  steps.allreduce_inside(data, sum, accumulation);
  if (h.place.rank == 0) steps.across().allreduce(stream, data, sum, accumulation);
  steps.broadcast_inside(data, 0);
}

}  // namespace

H2_ReduceOp library_op(ReduceOp op) {
  return op == ReduceOp::max ? H2_REDUCE_MAX : op == ReduceOp::avg ? H2_REDUCE_MEAN : H2_REDUCE_SUM;
}

Hierarchy hierarchy_of(std::vector<std::vector<int>> groups, int rank) {
  Hierarchy h;
  h.place = place_in(groups, rank);
  h.groups = std::move(groups);
  return h;
}

void join_across(CommState& s, const Device& device, Hierarchy& h, const std::string& key_prefix) {
  if (!h.place.across.empty()) {
    const std::string index = std::to_string(h.place.across_index);
    h.across = sub_communicator(s, device, h.place.across, key_prefix + "across/" + index, "across(" + index + ")");
  }
  if (h.equal()) {
    h.unit = h.place.size;
    h.pieces.push_back({h.place.rank, h.place.rank + 1, h.across});
    return;
  }
  std::vector<int> everyone(s.members.size());
  std::iota(everyone.begin(), everyone.end(), 0);
  h.exchange = sub_communicator(s, device, everyone, key_prefix + "exchange", "exchange");
  // Beyond this, most tensors would be mostly tail: the first ranks carry the whole tensor instead.
  constexpr int64_t kMaxUnit = 4096;
  const ShardPieces found = shard_pieces(h.groups, kMaxUnit);
  h.unit = found.unit;
  for (size_t j = 0; j < found.pieces.size(); ++j) {
    const ShardPiece& piece = found.pieces[j];
    if (std::find(piece.holders.begin(), piece.holders.end(), s.rank) == piece.holders.end()) continue;
    const std::string index = std::to_string(j);
    h.pieces.push_back(
        {piece.begin, piece.end,
         sub_communicator(s, device, piece.holders, key_prefix + "piece/" + index, "piece(" + index + ")")});
  }
}

std::shared_ptr<CommState> sub_communicator(CommState& s, const Device& device, const std::vector<int>& ranks,
                                            const std::string& key, const std::string& name) {
  World& world = *s.world;
  auto sub = std::make_shared<CommState>();
  sub->world = s.world;
  sub->name = s.name + "/" + name;
  for (size_t i = 0; i < ranks.size(); ++i) {
    sub->members.push_back(s.members[static_cast<size_t>(ranks[i])]);
    if (ranks[i] == s.rank) sub->rank = static_cast<int>(i);
  }
  if (sub->rank == 0) {
    sub->id = world.new_comm_id();
    world.store()->set(key, std::to_string(sub->id));
  } else {
    sub->id = static_cast<uint32_t>(std::stoul(world.store()->get(key)));
  }
  sub->vendor = std::make_shared<VendorPath>(device);
  sub->vendor->why_not = "a step of a hierarchical collective";
  return sub;
}

void hierarchical_allreduce(CommState& s, Hierarchy& h, Stream& stream, const Tensor& data, ReduceOp op,
                            Accumulation accumulation, const std::string& what) {
  Steps steps(s, h, stream, what, "allreduce");
  if (op == ReduceOp::avg && !h.equal()) {
    // The mean of groups' means of several sizes is not the mean: each contribution is scaled
    // first, and summed (so no partial sum of f16 grows past its range either).
    ops::binary(stream, ops::BinaryOp::div, data, static_cast<double>(s.members.size()), data);
    op = ReduceOp::sum;
  }
  // Groups of one size: an average is the mean inside (over m) of the means between (over the
  // groups), each rounding once.
  const int64_t m = h.place.size, n = data.numel(), body = h.unit > 0 ? n - n % h.unit : 0;
  if (body > 0) {
    const Tensor head = data.slice(0, 0, body);
    const Tensor shard = head.slice(0, h.place.rank * (body / m), (h.place.rank + 1) * (body / m));
    steps.reduce_scatter_inside(head, shard, op, accumulation);
    for (const Hierarchy::Piece& piece : h.pieces)
      communicator_over(piece.across)
          .allreduce(stream, head.slice(0, piece.begin * (body / h.unit), piece.end * (body / h.unit)), op,
                     accumulation);
    steps.allgather_inside(shard, head);
  }
  if (body < n) allreduce_through_first_ranks(s, h, steps, stream, data.slice(0, body, n), op, accumulation);
}

void hierarchical_reduce_scatter(CommState& s, Hierarchy& h, Stream& stream, const Tensor& input, const Tensor& output,
                                 ReduceOp op, Accumulation accumulation, const std::string& what) {
  Steps steps(s, h, stream, what, "reduce_scatter");
  if (!h.equal()) return reduce_scatter_over_sizes(s, h, steps, stream, input, output, op, accumulation);
  const int64_t n = output.numel(), groups = static_cast<int64_t>(h.groups.size());
  const std::vector<int> order = place_order(h);
  // Reordered into a temporary unless the ranks are numbered place by place already; a reduce-scatter
  // inside then runs in place there (never in the caller's input, which stays as it was).
  Temporaries temporaries(s, stream, input.device());
  Tensor ordered = input;
  if (!in_rank_order(order)) {
    ordered = temporaries.make(input.numel(), input.dtype());
    for (size_t k = 0; k < order.size(); ++k)
      copy_elements(stream, input, order[k] * n, ordered, static_cast<int64_t>(k) * n, n);
  }
  // Inside: this rank (place i) keeps the group's sums of blocks [i G, (i + 1) G), those of every
  // group's rank i; between, rank i of group g keeps block g of those, its own.
  Tensor mine = ordered;
  if (h.place.size > 1) {
    mine = ordered.same_view(input) ? temporaries.make(groups * n, input.dtype())
                                    : ordered.slice(0, h.place.rank * groups * n, (h.place.rank + 1) * groups * n);
    steps.reduce_scatter_inside(ordered, mine, op, accumulation);
  }
  steps.across().reduce_scatter(stream, mine, output, op, accumulation);
}

void hierarchical_allgather(CommState& s, Hierarchy& h, Stream& stream, const Tensor& input, const Tensor& output,
                            const std::string& what) {
  Steps steps(s, h, stream, what, "allgather");
  if (!h.equal()) return allgather_over_sizes(s, h, steps, stream, input, output);
  const int64_t n = input.numel(), groups = static_cast<int64_t>(h.groups.size());
  const std::vector<int> order = place_order(h);
  const bool in_order = in_rank_order(order);
  Temporaries temporaries(s, stream, output.device());
  const Tensor ordered = in_order ? output : temporaries.make(output.numel(), output.dtype());
  // Between: rank i of every group gathers every group's rank i's block, where an allgather inside
  // (in place) then expects this rank's part of the blocks ordered place by place.
  const Tensor mine = ordered.slice(0, h.place.rank * groups * n, (h.place.rank + 1) * groups * n);
  steps.across().allgather(stream, input, mine);
  if (h.place.size > 1) steps.allgather_inside(mine, ordered);
  if (!in_order)
    for (size_t k = 0; k < order.size(); ++k)
      copy_elements(stream, ordered, static_cast<int64_t>(k) * n, output, order[k] * n, n);
}

void hierarchical_broadcast(CommState& s, Hierarchy& h, Stream& stream, const Tensor& data, int root,
                            const std::string& what) {
  Steps steps(s, h, stream, what, "broadcast");
  const GroupPlace from = place_in(h.groups, root);
  const int root_group = static_cast<int>(from.group);
  if (h.equal()) {
    // The root's place in every group has a communicator between the groups: it carries the
    // tensor to every group, and each group spreads it from there.
    if (h.place.rank == from.rank) steps.across().broadcast(stream, data, root_group);
    steps.broadcast_inside(data, from.rank);
    return;
  }
  const bool roots_group = h.place.group == from.group;
  if (roots_group) steps.broadcast_inside(data, from.rank);
  if (h.place.rank == 0) steps.across().broadcast(stream, data, root_group);
  if (!roots_group) steps.broadcast_inside(data, 0);
}

}  // namespace h2::dicomm::detail
