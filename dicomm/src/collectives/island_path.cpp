#include "island_path.hpp"

#include <algorithm>

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
  if (!worth_a_hierarchy(found, setting == "hierarchical")) return;
  // Halving and doubling already sums island by island where it follows the islands: allreduces
  // stay flat then, the other collectives (rings, chains) still cross island by island.
  path.allreduce_flat =
      setting != "hierarchical" && world.halving_doubling(size) && halving_doubling_follows(found, size);
  Hierarchy h = hierarchy_of(found, s.rank);
  const std::string prefix = "dicomm/islands/" + std::to_string(s.id) + "/";
  if (h.place.size > 1) {
    const std::string index = std::to_string(h.place.group);
    h.inside = sub_communicator(s, device, found[h.place.group], prefix + "island/" + index, "island(" + index + ")");
  }
  join_across(s, device, h, prefix);
  const std::string which = path.allreduce_flat ? "reduce-scatters, allgathers and broadcasts" : "collectives";
  log(LogLevel::info, "dicomm",
      "communicator '" + s.name + "': large " + which + " hierarchical over islands " + describe(found) + " (" +
          h.between() + " between them" +
          (path.allreduce_flat ? "; allreduces by halving and doubling, which follows them)" : ")"));
  path.hierarchy = std::move(h);
}

}  // namespace

Hierarchy* island_hierarchy(CommState& s, const Device& device, bool allreduce) {
  if (s.islands) {
    if (!s.islands->failure.empty())
      throw CommError(CommErrorKind::transport, -1,
                      "DiComm: communicator '" + s.name + "' could not set up its islands: " + s.islands->failure);
    return s.islands->hierarchy && !(allreduce && s.islands->allreduce_flat) ? &*s.islands->hierarchy : nullptr;
  }
  // Decided in full or not at all: a decision that failed half-way (a store timeout) leaves every
  // later collective of the communicator refused, never ranks on different paths.
  auto path = std::make_shared<IslandPath>();
  try {
    decide_islands(s, device, *path);
  } catch (const std::exception& e) {
    path->failure = e.what();
    s.islands = path;
    throw;
  }
  s.islands = path;
  return path->hierarchy && !(allreduce && path->allreduce_flat) ? &*path->hierarchy : nullptr;
}

}  // namespace h2::dicomm::detail
