// The sum of every layer's gradients over the replicas that hold it (HeteroPP's data parallelism),
// also when replicas cut a layer with different tensor-parallel degrees (HexiScale's asymmetric
// tensor parallelism).
//
// A layer's sharded parameters are cut, for the sum, into F pieces, F the least common multiple of
// its holders' degrees: a rank of degree t with tensor-parallel index r holds pieces
// [r F/t, (r+1) F/t) of each of the parameter's groups (w_qkv's q, k and v columns cut apiece).
// Every piece is summed over the ranks holding it, one per replica. When all holders share one degree,
// a piece is a rank's whole shard and the sum runs in place on ranges of the flat gradient buffer;
// otherwise a rank packs its pieces (strided views) into one buffer per group of ranks, sums it, and
// unpacks. A layer's whole (unsharded) parameters, identical on the ranks of one tensor-parallel
// group, are then summed over all its holders with each rank's copy weighted by 1/t, so that every
// replica counts once.
//
// Groups are sets of ranks; every rank walks them in one global order, so no two ranks can wait on
// each other in a cycle.
#pragma once

#include <utility>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"

namespace h2::heteropp {

class GradientSync {
 public:
  // Collective over `world` (it splits one communicator per group of two or more ranks).
  GradientSync(const Placement& placement, const dicomm::Communicator& world, GptStage& model, Stream& stream,
               Timeline& timeline);

  // Replaces this rank's gradients with their sums over the replicas; returns when they are done.
  void sum();

 private:
  // What this rank sends in one group: views of its gradients, each weighted (1 / its degree for a
  // mixed layer's whole parameters).
  struct Part {
    Tensor view;
    double weight = 1;
  };
  struct Group {
    std::vector<int> ranks;  // the world ranks summing these parts
    std::vector<int> layers;
    std::vector<Part> parts;                          // empty on ranks outside the group
    std::vector<std::pair<int64_t, int64_t>> ranges;  // in place: [begin, end) of the flat gradients
    dicomm::Communicator comm;                        // invalid outside the group, and for one rank
  };

  Group& group_of(std::map<std::vector<int>, size_t>& index, const std::vector<int>& ranks);
  void add_layer(std::map<std::vector<int>, size_t>& index, int layer);

  const Placement& placement_;
  const dicomm::Communicator& world_;
  const StageRole& role_;
  GptStage& model_;
  Stream& stream_;
  Timeline& timeline_;
  std::vector<Group> groups_;
};

}  // namespace h2::heteropp
