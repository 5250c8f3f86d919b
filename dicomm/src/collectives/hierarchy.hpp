// Collectives over groups of a communicator's ranks, run as steps inside each group and steps
// between the groups. The groups are islands of ranks joined by fast links, whose steps inside are
// DiComm's own algorithms (island_path.hpp), or the ranks of one plugin's collective library, whose
// steps inside are the library's (vendor_path.hpp). One set of algorithms serves both:
//
//   allreduce       reduce-scatter inside (a group of m cuts the tensor into m shards), allreduce
//                   between the groups, allgather inside. Groups of one size: rank i of every group
//                   with rank i of the others, on shard i. Groups of several sizes: each piece
//                   where shards of every group overlap (islands.hpp's shard_pieces) between the
//                   ranks that hold it, one per group. The last elements that the sizes do not
//                   divide: sum inside, between the groups' first ranks, broadcast inside.
//   reduce_scatter  groups of one size: the input's blocks reordered so that a reduce-scatter
//                   inside leaves on rank i of each group the group's sum of the blocks of every
//                   group's rank i; a reduce-scatter between those ranks leaves each its own block.
//                   Groups of several sizes: reordered so that a reduce-scatter inside leaves on
//                   each rank the group's sum of its own block and of a slice of the other groups'
//                   blocks (islands.hpp's block_layout); each slice's pieces then go to their
//                   blocks' owners, which add what every other group sent to their group's sum.
//   allgather       the reverse (between, then inside, blocks back in order).
//   broadcast       groups of one size: between the root's place in every group, then inside from
//                   there; else inside the root's group, between the first ranks, inside the others.
//
// So the links between groups carry a shard per rank (or the tensor once per group, for a
// broadcast) and the fast links inside carry the rest.
// Every call blocks until its last step has been issued on `stream`; ranks issue the steps of
// several communicators in one order (piece by piece), so none waits for a step another has yet to
// reach.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "collectives/islands.hpp"
#include "world.hpp"

namespace h2::dicomm::detail {

struct Hierarchy {
  std::vector<std::vector<int>> groups;  // communicator ranks, each group in its order
  GroupPlace place;                      // this rank's
  // The steps inside this rank's group: on its plugin's library, or on DiComm's own algorithms;
  // neither for a group of one.
  std::shared_ptr<PluginComm> library;
  std::shared_ptr<CommState> inside;
  // Between the groups: this rank's place in every group (groups of one size), else the groups'
  // first ranks (null on the others). Its rank g is group g's.
  std::shared_ptr<CommState> across;
  // Groups of several sizes: every rank, in the communicator's order, for the point-to-point pieces
  // of a reduce-scatter or an allgather (a communicator of its own, so that its messages never meet
  // the caller's). Null for groups of one size.
  std::shared_ptr<CommState> exchange;
  // The allreduce's pieces this rank holds (see shard_pieces), positions in `unit`ths of the
  // tensor, each with its communicator between the holders (`across` for groups of one size);
  // unit 0 where the sizes' least common multiple is too large for pieces.
  struct Piece {
    int64_t begin = 0, end = 0;
    std::shared_ptr<CommState> across;
  };
  int64_t unit = 0;
  std::vector<Piece> pieces;
  // The collectives that have run hierarchically so far (each is logged the first time).
  std::set<std::string> announced;

  bool equal() const { return place.equal; }
  // How an allreduce crosses between the groups, for the log: "shard by shard", "piece by piece"
  // (groups of several sizes) or "first ranks".
  const char* between() const { return equal() ? "shard by shard" : unit > 0 ? "piece by piece" : "first ranks"; }
};

// `groups` (communicator ranks) and communicator rank `rank`'s place among them.
Hierarchy hierarchy_of(std::vector<std::vector<int>> groups, int rank);
// Makes the DiComm communicators between the groups (`h.across`, the pieces', `h.exchange`), named under
// `key_prefix` in the store. Collective over the communicator's members, after the steps inside.
void join_across(CommState& s, const Device& device, Hierarchy& h, const std::string& key_prefix);

// A DiComm communicator over communicator ranks `ranks` of `s` (this rank among them), on DiComm's own
// algorithms: a step of a hierarchical collective. Its first member makes its id and publishes it
// under `key` in the store; the others read it. Every member of `ranks` calls it, in one order.
std::shared_ptr<CommState> sub_communicator(CommState& s, const Device& device, const std::vector<int>& ranks,
                                            const std::string& key, const std::string& name);

// The collectives of hierarchy.hpp's header, on communicator `s`; `what` names the call in errors.
// Tensors are flat and contiguous, checked by the caller. The first of each kind logs (info)
// "communicator 'NAME': first hierarchical KIND".
void hierarchical_allreduce(CommState& s, Hierarchy& h, Stream& stream, const Tensor& data, ReduceOp op,
                            Accumulation accumulation, const std::string& what);
void hierarchical_reduce_scatter(CommState& s, Hierarchy& h, Stream& stream, const Tensor& input, const Tensor& output,
                                 ReduceOp op, Accumulation accumulation, const std::string& what);
void hierarchical_allgather(CommState& s, Hierarchy& h, Stream& stream, const Tensor& input, const Tensor& output,
                            const std::string& what);
void hierarchical_broadcast(CommState& s, Hierarchy& h, Stream& stream, const Tensor& data, int root,
                            const std::string& what);

// The plugin library's reduction for DiComm's.
H2_ReduceOp library_op(ReduceOp op);

}  // namespace h2::dicomm::detail
