// An allreduce of DiComm's own algorithms over a communicator whose ranks form islands (islands.hpp):
// reduce-scatter inside each island, allreduce between the islands on the shards (rank i of every
// island with rank i of the others), allgather inside; with islands of several sizes, allreduce
// inside, between the islands' first ranks, broadcast inside. So the slow links between islands
// carry a shard per rank instead of a ring's whole tensor, whatever the ranks' numbering and count.
// Recursive halving and doubling does the same where it applies and the islands are blocks of
// consecutive ranks (it exchanges with the nearest rank first): then it runs instead.
//
// H2_DICOMM_ALLREDUCE=auto chooses this above H2_DICOMM_SMALL_BYTES for islands of one size;
// `hierarchical` wherever there are islands; `ring` and `halving_doubling` never. The members decide
// alike from the links every rank published when the world met, at the communicator's first large
// allreduce, and make the two communicators of the steps then (a round through the store).
#pragma once

#include <memory>
#include <string>

#include "world.hpp"

namespace h2::dicomm::detail {

struct IslandPath {
  bool hierarchical = false;
  std::string failure;  // when making the steps' communicators failed: every later allreduce is refused
  int island_size = 1, island_rank = 0;
  bool equal_islands = false;
  std::shared_ptr<CommState> inner;  // this rank's island; null for an island of one
  // Equal islands: this rank's place in every island; else the islands' first ranks (null for the
  // others). Either way, on an island's first rank, the first ranks of every island.
  std::shared_ptr<CommState> across;
};

// The hierarchy communicator `s`'s allreduces run on, or nullptr where they run flat. Collective
// over the communicator's members the first time.
IslandPath* island_path(CommState& s, const Device& device);

}  // namespace h2::dicomm::detail
