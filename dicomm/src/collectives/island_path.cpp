#include "island_path.hpp"

#include <algorithm>

#include "collectives/islands.hpp"
#include "collectives/vendor_path.hpp"
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

}  // namespace

IslandPath* island_path(CommState& s, const Device& device) {
  if (s.islands) return s.islands->hierarchical ? s.islands.get() : nullptr;
  auto path = std::make_shared<IslandPath>();
  World& world = *s.world;
  const std::string& setting = world.allreduce_setting();
  const int size = static_cast<int>(s.members.size());
  if (size > 2 && (setting == "auto" || setting == "hierarchical")) {
    const std::vector<std::vector<int>> found = islands(size, [&](int a, int b) {
      return world.link_gbps(s.members[static_cast<size_t>(a)], s.members[static_cast<size_t>(b)]);
    });
    path->hierarchical =
        worth_a_hierarchy(found) &&
        (setting == "hierarchical" || !(world.halving_doubling(size) && halving_doubling_follows(found, size)));
    if (path->hierarchical) {
      size_t mine = 0;
      while (std::find(found[mine].begin(), found[mine].end(), s.rank) == found[mine].end()) ++mine;
      const std::vector<int>& island = found[mine];
      path->island_size = static_cast<int>(island.size());
      path->island_rank = static_cast<int>(std::find(island.begin(), island.end(), s.rank) - island.begin());
      path->equal_islands =
          std::all_of(found.begin(), found.end(), [&](const auto& other) { return other.size() == island.size(); });
      const std::string prefix = "dicomm/islands/" + std::to_string(s.id) + "/";
      if (island.size() > 1)
        path->inner = sub_communicator(s, device, island, prefix + "island/" + std::to_string(mine),
                                       "island(" + std::to_string(mine) + ")");
      if (path->equal_islands || path->island_rank == 0) {
        const size_t index = path->equal_islands ? static_cast<size_t>(path->island_rank) : 0;
        std::vector<int> across;
        for (const auto& other : found) across.push_back(other[index]);
        path->across = sub_communicator(s, device, across, prefix + "across/" + std::to_string(index),
                                        "across(" + std::to_string(index) + ")");
      }
      log(LogLevel::info, "dicomm",
          "communicator '" + s.name + "': large allreduces hierarchical over islands " + describe(found) +
              (path->equal_islands ? " (shard by shard between them)" : " (first ranks between them)"));
    }
  }
  s.islands = path;
  return path->hierarchical ? path.get() : nullptr;
}

}  // namespace h2::dicomm::detail
