#include "gradient_sync.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "h2/ops.hpp"

namespace h2::heteropp {

namespace {

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// Piece `piece` (of `pieces`) of this rank's shard of `p`, for a rank of degree `tp` and index
// `tp_rank`: one view per group of the parameter's sharding.
std::vector<Tensor> piece_views(const Parameter& p, int pieces, int tp, int tp_rank, int piece) {
  std::vector<Tensor> views;
  const int64_t local = piece - static_cast<int64_t>(tp_rank) * (pieces / tp);
  int64_t group_start = 0;
  for (int64_t width : p.sharding.groups) {
    const int64_t part = width / pieces;
    views.push_back(p.grad.slice(p.sharding.axis, group_start + local * part, group_start + (local + 1) * part));
    group_start += width / tp;
  }
  return views;
}

}  // namespace

GradientSync::GradientSync(const Placement& placement, const dicomm::Communicator& world, GptStage& model,
                           Stream& stream, Timeline& timeline)
    : placement_(placement),
      world_(world),
      role_(placement.roles.at(static_cast<size_t>(world.rank()))),
      model_(model),
      stream_(stream),
      timeline_(timeline) {
  std::map<std::vector<int>, size_t> index;
  for (const auto& [layer, holders] : placement_.holders) add_layer(index, layer);
  // Collective over the world, in the same order on every rank; single-rank groups need none.
  for (Group& group : groups_) {
    if (group.ranks.size() < 2) continue;
    group.comm = world_.split(contains(group.ranks, world_.rank()) ? 0 : -1, world_.rank());
  }
}

GradientSync::Group& GradientSync::group_of(std::map<std::vector<int>, size_t>& index, const std::vector<int>& ranks) {
  auto [it, fresh] = index.try_emplace(ranks, groups_.size());
  if (fresh) groups_.push_back({ranks, {}, {}, {}, {}});
  return groups_[it->second];
}

// Adds `layer`'s pieces to their groups (every rank, for the groups' order), and this rank's parts.
void GradientSync::add_layer(std::map<std::vector<int>, size_t>& index, int layer) {
  const int pieces = placement_.pieces.at(layer);
  const bool mine = contains(placement_.holders.at(layer), world_.rank());
  const bool uniform = placement_.uniform_degree(layer);
  // Only blocks are cut over tensor-parallel ranks (the embedding and the head are whole): a mixed
  // embedding or head has no pieces to sum, only its whole parameters below.
  const bool cut = layer >= 0 && layer < placement_.model_layers;
  for (int piece = 0; piece < (uniform || cut ? pieces : 0); ++piece) {
    Group& group = group_of(index, placement_.piece_holders.at({layer, piece}));
    if (!mine || !contains(group.ranks, world_.rank())) continue;
    group.layers.push_back(layer);
    for (const Parameter& p : model_.parameters()) {
      if (p.layer != layer) continue;
      if (uniform) {  // the rank's whole shard, whole parameters included: a range of the flat buffer
        const int64_t begin = p.grad_offset, end = p.grad_offset + p.grad.numel();
        if (!group.ranges.empty() && group.ranges.back().second == begin)
          group.ranges.back().second = end;
        else
          group.ranges.emplace_back(begin, end);
      } else if (p.sharding.sharded()) {
        for (const Tensor& view : piece_views(p, pieces, role_.tp, role_.tp_rank, piece)) group.parts.push_back({view});
      }
    }
  }
  if (uniform) return;
  // A mixed layer's whole parameters: every holder, its copy weighted by 1 / its degree.
  Group& group = group_of(index, placement_.holders.at(layer));
  if (!mine) return;
  group.layers.push_back(layer);
  for (const Parameter& p : model_.parameters())
    if (p.layer == layer && !p.sharding.sharded()) group.parts.push_back({p.grad, 1.0 / role_.tp});
}

void GradientSync::sum() {
  for (Group& group : groups_) {
    if (!group.comm.valid()) continue;
    const Timeline::Clock::time_point start = Timeline::Clock::now();
    int64_t elements = 0;
    for (auto [begin, end] : group.ranges) {
      group.comm.allreduce(stream_, model_.flat_grads().slice(0, begin, end), dicomm::ReduceOp::sum);
      elements += end - begin;
    }
    if (!group.parts.empty()) {
      // Strided pieces: packed into one buffer (weighted), summed, unpacked.
      const int64_t total = std::accumulate(group.parts.begin(), group.parts.end(), int64_t{0},
                                            [](int64_t n, const Part& part) { return n + part.view.numel(); });
      const Tensor packed = Tensor::empty(stream_, {total}, DType::f32);
      int64_t offset = 0;
      for (const Part& part : group.parts) {
        const Tensor slot = packed.slice(0, offset, offset + part.view.numel()).view(part.view.shape());
        if (part.weight == 1)
          ops::copy(stream_, part.view, slot);
        else
          ops::binary(stream_, ops::BinaryOp::mul, part.view, part.weight, slot);
        offset += part.view.numel();
      }
      group.comm.allreduce(stream_, packed, dicomm::ReduceOp::sum);
      offset = 0;
      for (const Part& part : group.parts) {
        ops::copy(stream_, packed.slice(0, offset, offset + part.view.numel()).view(part.view.shape()), part.view);
        offset += part.view.numel();
      }
      elements += total;
    }
    stream_.synchronize();
    timeline_.add("allreduce gradients", "comm", start, Timeline::Clock::now(),
                  {{"layers", group.layers}, {"ranks", group.ranks}, {"elements", elements}});
  }
}

}  // namespace h2::heteropp
