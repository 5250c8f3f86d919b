#include "island_path.hpp"

#include <algorithm>

#include "collectives/islands.hpp"
#include "collectives/vendor_path.hpp"
#include "h2/dicomm/error.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

namespace {

std::string describe(const std::vector<std::vector<int>>& found) {
  std::string text;
  for (const auto& island : found) {
    text += text.empty() ? "{" : " {";
    for (size_t i = 0; i < island.size(); ++i) text += (i ? "," : "") + std::to_string(island[i]);
    text += "}";
  }
  return text;
}

// Fills `path` for communicator `s`, making the steps' communicators. Collective.
void decide_islands(CommState& s, const Device& device, IslandPath& path) {
  World& world = *s.world;
  const std::string& setting = world.allreduce_setting();
  const int size = static_cast<int>(s.members.size());
  if (size <= 2 || (setting != "auto" && setting != "hierarchical")) return;
  const std::vector<std::vector<int>> found = islands(size, [&](int a, int b) {
    return world.link_gbps(s.members[static_cast<size_t>(a)], s.members[static_cast<size_t>(b)]);
  });
  path.hierarchical =
      worth_a_hierarchy(found, setting == "hierarchical") &&
      (setting == "hierarchical" || !(world.halving_doubling(size) && halving_doubling_follows(found, size)));
  if (!path.hierarchical) return;
  size_t mine = 0;
  while (std::find(found[mine].begin(), found[mine].end(), s.rank) == found[mine].end()) ++mine;
  const std::vector<int>& island = found[mine];
  path.island_size = static_cast<int>(island.size());
  path.island_rank = static_cast<int>(std::find(island.begin(), island.end(), s.rank) - island.begin());
  path.equal_islands =
      std::all_of(found.begin(), found.end(), [&](const auto& other) { return other.size() == island.size(); });
  const std::string prefix = "dicomm/islands/" + std::to_string(s.id) + "/";
  if (island.size() > 1)
    path.inner = sub_communicator(s, device, island, prefix + "island/" + std::to_string(mine),
                                  "island(" + std::to_string(mine) + ")");
  if (path.equal_islands || path.island_rank == 0) {
    const size_t index = path.equal_islands ? static_cast<size_t>(path.island_rank) : 0;
    std::vector<int> across;
    for (const auto& other : found) across.push_back(other[index]);
    path.across = sub_communicator(s, device, across, prefix + "across/" + std::to_string(index),
                                   "across(" + std::to_string(index) + ")");
  }
  log(LogLevel::info, "dicomm",
      "communicator '" + s.name + "': large allreduces hierarchical over islands " + describe(found) +
          (path.equal_islands ? " (shard by shard between them)" : " (first ranks between them)"));
}

}  // namespace

IslandPath* island_path(CommState& s, const Device& device) {
  if (s.islands) {
    if (!s.islands->failure.empty())
      throw CommError(CommErrorKind::transport, -1,
                      "DiComm: communicator '" + s.name + "' could not set up its islands: " + s.islands->failure);
    return s.islands->hierarchical ? s.islands.get() : nullptr;
  }
  // Decided in full or not at all: a decision that failed half-way (a store timeout) leaves every
  // later allreduce of the communicator refused, never ranks on different paths.
  auto path = std::make_shared<IslandPath>();
  try {
    decide_islands(s, device, *path);
  } catch (const std::exception& e) {
    path->failure = e.what();
    s.islands = path;
    throw;
  }
  s.islands = path;
  return path->hierarchical ? path.get() : nullptr;
}

}  // namespace h2::dicomm::detail
