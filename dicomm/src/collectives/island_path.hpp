// The collectives of DiComm's own algorithms over a communicator whose ranks form islands
// (islands.hpp), run hierarchically (hierarchy.hpp): DiComm's steps inside each island and between
// the islands, so the slow links between islands carry a shard per rank instead of a ring's whole
// tensor, whatever the ranks' numbering and count. Recursive halving and doubling does the same for
// an allreduce where it applies and the islands are blocks of consecutive ranks (it exchanges with
// the nearest rank first): then the communicator's allreduces run flat, its other collectives
// still island by island.
//
// H2_DICOMM_ALLREDUCE=auto chooses this above H2_DICOMM_SMALL_BYTES for islands of one size;
// `hierarchical` wherever there are islands (allreduce and broadcast; reduce-scatter and allgather
// over islands of several sizes run flat); `ring` and `halving_doubling` never. The members decide
// alike from the links every rank published when the world met, at the communicator's first large
// collective, and make the steps' communicators then (a round through the store).
#pragma once

#include <optional>
#include <string>

#include "collectives/hierarchy.hpp"
#include "world.hpp"

namespace h2::dicomm::detail {

struct IslandPath {
  std::string failure;                 // when making the steps' communicators failed: every later collective is refused
  std::optional<Hierarchy> hierarchy;  // none where the communicator runs flat
  bool allreduce_flat = false;         // halving and doubling follows the islands already
};

// The hierarchy communicator `s`'s large collectives (an allreduce where `allreduce`) run on, or
// nullptr where they run flat. Collective over the communicator's members the first time.
Hierarchy* island_hierarchy(CommState& s, const Device& device, bool allreduce);

}  // namespace h2::dicomm::detail
