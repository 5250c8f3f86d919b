#include "islands.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>

namespace h2::dicomm::detail {

std::vector<std::vector<int>> islands(int size, const std::function<double(int, int)>& gbps) {
  std::vector<double> speed(static_cast<size_t>(size) * static_cast<size_t>(size), 0);
  double slowest = std::numeric_limits<double>::infinity();
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b) {
      const double s = gbps(a, b);
      speed[static_cast<size_t>(a) * static_cast<size_t>(size) + static_cast<size_t>(b)] = s;
      slowest = std::min(slowest, s);
    }
  const auto faster = [&](int a, int b) {
    const double s = speed[static_cast<size_t>(a) * static_cast<size_t>(size) + static_cast<size_t>(b)];
    return s == std::numeric_limits<double>::infinity() ? slowest < s : slowest > 0 && s >= 2 * slowest;
  };
  // Union-find over the links faster than the slowest; the smallest rank roots each component.
  std::vector<int> root(static_cast<size_t>(size));
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](int r) {
    while (root[static_cast<size_t>(r)] != r)
      r = root[static_cast<size_t>(r)] = root[static_cast<size_t>(root[static_cast<size_t>(r)])];
    return r;
  };
  bool alike = true;
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b)
      if (faster(a, b)) {
        alike = false;
        const int ra = find(a), rb = find(b);
        root[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);
      }
  if (alike) {  // no link clearly faster: one island, not one per rank
    std::vector<int> all(static_cast<size_t>(size));
    std::iota(all.begin(), all.end(), 0);
    return {all};
  }
  std::vector<std::vector<int>> found;
  std::vector<int> index_of(static_cast<size_t>(size), -1);
  for (int r = 0; r < size; ++r) {
    int& index = index_of[static_cast<size_t>(find(r))];
    if (index < 0) {
      index = static_cast<int>(found.size());
      found.emplace_back();
    }
    found[static_cast<size_t>(index)].push_back(r);
  }
  return found;
}

bool halving_doubling_follows(const std::vector<std::vector<int>>& islands, int size) {
  const auto power_of_two = [](size_t n) { return n > 0 && (n & (n - 1)) == 0; };
  if (!power_of_two(static_cast<size_t>(size)) || islands.empty()) return false;
  const size_t m = islands.front().size();
  if (!power_of_two(m)) return false;
  for (const std::vector<int>& island : islands) {
    if (island.size() != m || island.front() % static_cast<int>(m) != 0) return false;
    for (size_t i = 1; i < m; ++i)
      if (island[i] != island[i - 1] + 1) return false;
  }
  return true;
}

bool worth_a_hierarchy(const std::vector<std::vector<int>>& islands, bool forced) {
  if (islands.size() < 2) return false;
  const auto several = [](const std::vector<int>& island) { return island.size() >= 2; };
  if (forced) return std::any_of(islands.begin(), islands.end(), several);
  return several(islands.front()) && std::all_of(islands.begin(), islands.end(), [&](const std::vector<int>& island) {
           return island.size() == islands.front().size();
         });
}

GroupPlace place_in(const std::vector<std::vector<int>>& groups, int rank) {
  GroupPlace place;
  while (std::find(groups[place.group].begin(), groups[place.group].end(), rank) == groups[place.group].end())
    ++place.group;
  const std::vector<int>& group = groups[place.group];
  place.size = static_cast<int>(group.size());
  place.rank = static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
  place.equal = std::all_of(groups.begin(), groups.end(), [&](const auto& g) { return g.size() == group.size(); });
  if (place.equal || place.rank == 0) {
    place.across_index = place.equal ? static_cast<size_t>(place.rank) : 0;
    for (const auto& g : groups) place.across.push_back(g[place.across_index]);
  }
  return place;
}

ShardPieces shard_pieces(const std::vector<std::vector<int>>& groups, int64_t max_unit) {
  ShardPieces result;
  int64_t unit = 1;
  for (const std::vector<int>& group : groups) {
    unit = std::lcm(unit, static_cast<int64_t>(group.size()));
    if (unit > max_unit) return result;
  }
  std::set<int64_t> cuts;  // every group's shard boundaries, in units
  for (const std::vector<int>& group : groups) {
    const int64_t width = unit / static_cast<int64_t>(group.size());
    for (int64_t at = 0; at < unit; at += width) cuts.insert(at);
  }
  result.unit = unit;
  for (auto cut = cuts.begin(); cut != cuts.end(); ++cut) {
    ShardPiece piece;
    piece.begin = *cut;
    piece.end = std::next(cut) == cuts.end() ? unit : *std::next(cut);
    for (const std::vector<int>& group : groups)
      piece.holders.push_back(group[static_cast<size_t>(piece.begin / (unit / static_cast<int64_t>(group.size())))]);
    result.pieces.push_back(std::move(piece));
  }
  return result;
}

BlockLayout block_layout(const std::vector<std::vector<int>>& groups, size_t group, int64_t block) {
  const std::vector<int>& inside = groups[group];
  std::vector<int> outside;  // in rank order
  for (size_t g = 0; g < groups.size(); ++g)
    if (g != group) outside.insert(outside.end(), groups[g].begin(), groups[g].end());
  std::sort(outside.begin(), outside.end());
  const int m = static_cast<int>(inside.size());
  const int64_t total = static_cast<int64_t>(outside.size()) * block;
  BlockLayout layout;
  layout.slices.resize(inside.size());
  if (block == 0) return layout;  // nothing to hold
  layout.segment = block + (total + m - 1) / m;
  for (int i = 0; i < m; ++i) {
    // Balanced slices, the first total % m one element longer (as Layout cuts segments).
    const auto slice_begin = [&](int64_t at) { return at * (total / m) + std::min<int64_t>(at, total % m); };
    const int64_t begin = slice_begin(i), end = slice_begin(i + 1);
    // The outside blocks [begin, end) meets: from the one holding `begin` to the one holding end - 1.
    for (int64_t k = begin / block; k * block < end; ++k) {
      const int64_t from = std::max(begin, k * block), to = std::min(end, (k + 1) * block);
      if (to <= from) continue;
      layout.slices[static_cast<size_t>(i)].push_back(
          {outside[static_cast<size_t>(k)], from - k * block, from - begin, to - from});
    }
  }
  return layout;
}

}  // namespace h2::dicomm::detail
