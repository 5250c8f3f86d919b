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
// sizes the ranks of the smaller islands carry more of what crosses between the islands than the
// others: a ring can beat that).
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

// How a reduce-scatter or an allgather of blocks of `block` elements (block r is rank r's) runs
// over groups of several sizes: inside group `group` of m ranks, place i holds a segment of
// `segment` elements, its rank's own block first, then slice i of the other groups' blocks (the
// blocks of every rank outside the group, in rank order, one after the other, cut into m balanced
// slices), then padding up to `segment`. Every group's segments are of one length, as a
// reduce-scatter or allgather inside needs. A slice meets each outside block in at most one piece:
// that piece travels between the slice's holder and the block's owner, the one transfer between
// groups. Every rank computes every group's layout alike.
struct OutsidePiece {
  int owner = 0;         // the rank whose block it is part of
  int64_t in_block = 0;  // where it starts in that block
  int64_t in_slice = 0;  // where it starts in the slice
  int64_t length = 0;
};
struct BlockLayout {
  int64_t segment = 0;
  std::vector<std::vector<OutsidePiece>> slices;  // per place
};
BlockLayout block_layout(const std::vector<std::vector<int>>& groups, size_t group, int64_t block);

}  // namespace h2::dicomm::detail
