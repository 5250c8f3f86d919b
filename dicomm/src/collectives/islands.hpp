// The islands of a communicator: its ranks grouped by the links between them, for collectives that
// sum inside each island before they cross the slow links between islands (Holmes' NIC-aware
// grouping; NCCL's trees and rings do the same by node). Pure functions of the link speeds, so that
// every rank groups alike without a word to the others.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace h2::dicomm::detail {

// The ranks 0 .. size - 1 grouped by links clearly faster than the slowest between any two of them
// (twice its speed, or ranks of one node, whose links are without limit): the connected components
// of those links, each in rank order, in order of their first rank. Where some link's speed is
// unknown (0), only nodes are told apart. One island where no link is clearly faster. `gbps(a, b)`
// is symmetric. A hierarchy over links that differ less costs more steps than it saves.
std::vector<std::vector<int>> islands(int size, const std::function<double(int, int)>& gbps);

// Whether recursive halving and doubling, which exchanges with the nearest rank first, already sums
// island by island: a power-of-two count of ranks in islands of one power-of-two size, each a block
// of consecutive ranks.
bool halving_doubling_follows(const std::vector<std::vector<int>>& islands, int size);

// Whether collectives over `islands` gain from running hierarchically: two islands or more, one of
// them of two ranks or more; and, unless `forced`, islands of one size (over islands of several
// sizes the ranks of the smaller islands carry several pieces of an allreduce each, and
// reduce-scatter and allgather run flat: a ring can beat that).
bool worth_a_hierarchy(const std::vector<std::vector<int>>& islands, bool forced);

// Where a rank stands among the groups of a hierarchical collective (islands, or plugins' library
// groups): its group, its place there, whether every group is one size, and whom it meets between
// the groups: its place in every group where they are one size (each sums a shard), else the
// groups' first ranks, for a first rank (empty for the others).
struct GroupPlace {
  size_t group = 0;
  int size = 1, rank = 0;
  bool equal = false;
  size_t across_index = 0;  // the place in each group of the members it meets between them
  std::vector<int> across;
};
GroupPlace place_in(const std::vector<std::vector<int>>& groups, int rank);

// Where groups of several sizes each cut a tensor into shards, one per rank (m equal shards for a
// group of m), the shards of different groups overlap. Cut at every group's shard boundaries, each
// piece lies in one shard of every group: the ranks holding it, one per group, sum it between them.
// Positions are in `unit`ths of the tensor, `unit` the sizes' least common multiple (0 where that
// exceeds `max_unit`: no pieces). Groups of one size m give m pieces, piece i held by every group's
// rank i.
struct ShardPiece {
  int64_t begin = 0, end = 0;
  std::vector<int> holders;  // in group order
};
struct ShardPieces {
  int64_t unit = 0;
  std::vector<ShardPiece> pieces;
};
ShardPieces shard_pieces(const std::vector<std::vector<int>>& groups, int64_t max_unit);

}  // namespace h2::dicomm::detail
