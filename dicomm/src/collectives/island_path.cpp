#include "island_path.hpp"

#include <algorithm>

#include "collectives/islands.hpp"
#include "collectives/vendor_path.hpp"
#include "common/rank_list.hpp"
#include "h2/dicomm/error.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

namespace {

std::string describe(const std::vector<std::vector<int>>& found) {
  std::string text;
  for (const auto& island : found) {
    text += (text.empty() ? "{" : " {") + rank_list(island) + "}";
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
  const GroupPlace place = place_in(found, s.rank);
  path.island_size = place.size;
  path.island_rank = place.rank;
  path.equal_islands = place.equal;
  const std::string prefix = "dicomm/islands/" + std::to_string(s.id) + "/";
  if (place.size > 1)
    path.inner = sub_communicator(s, device, found[place.group], prefix + "island/" + std::to_string(place.group),
                                  "island(" + std::to_string(place.group) + ")");
  if (!place.across.empty())
    path.across = sub_communicator(s, device, place.across, prefix + "across/" + std::to_string(place.across_index),
                                   "across(" + std::to_string(place.across_index) + ")");
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
