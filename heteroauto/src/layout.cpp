// The free functions of layout.hpp: canonical node groups and the options a layout may take.
#include <algorithm>
#include <functional>
#include <tuple>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {

namespace {

auto identity(const NodeGroup& g) {
  return std::tie(g.device_type, g.devices_per_node, g.intra_node_bandwidth_gbps, g.intra_node_latency_us, g.nic,
                  g.nics_per_node, g.cluster, g.on_shared_host);
}

}  // namespace

CanonicalCluster canonicalize(const Cluster& cluster) {
  CanonicalCluster result;
  result.cluster = cluster;
  result.cluster.nodes.clear();
  for (const NodeGroup& g : cluster.nodes) {
    size_t i = 0;
    while (i < result.cluster.nodes.size() && identity(result.cluster.nodes[i]) != identity(g)) ++i;
    if (i == result.cluster.nodes.size()) {
      result.cluster.nodes.push_back(g);
      result.members.push_back({{g.name, g.count}});
    } else {
      result.cluster.nodes[i].count += g.count;
      result.cluster.nodes[i].name += "+" + g.name;
      result.members[i].push_back({g.name, g.count});
    }
  }
  return result;
}

std::vector<int> tensor_parallel_options(const NodeGroup& group, const Model& model, int devices) {
  std::vector<int> tps;
  for (int tp = 1; tp <= std::min(devices, group.devices_per_node); tp *= 2) {
    // HeteroPP gives each tensor-parallel rank whole KV heads (it does not copy them), so kv_heads
    // must divide like heads and ffn.
    if (group.devices_per_node % tp != 0 || model.heads % tp != 0 || model.kv_heads % tp != 0 || model.ffn % tp != 0)
      continue;
    tps.push_back(tp);
  }
  return tps;
}

std::vector<int> replica_options(const Cluster& groups, const std::vector<int>& block, int micro_batches) {
  int smallest = micro_batches;
  for (int g : block) smallest = std::min(smallest, groups.nodes[g].devices());
  std::vector<int> options;
  for (int r = 1; r <= smallest; ++r) {
    bool divides = micro_batches % r == 0;
    for (int g : block) divides = divides || groups.nodes[g].devices() % r == 0;
    if (divides) options.push_back(r);
  }
  return options;
}

void for_each_pick(const std::vector<size_t>& sizes, const std::function<bool(const std::vector<size_t>&)>& each) {
  for (size_t size : sizes)
    if (size == 0) return;
  std::vector<size_t> pick(sizes.size(), 0);
  while (each(pick)) {
    size_t i = 0;  // advance like an odometer
    while (i < pick.size() && ++pick[i] == sizes[i]) pick[i++] = 0;
    if (i == pick.size()) return;
  }
}

void for_each_class_partition(int groups, int max_classes,
                              const std::function<bool(const std::vector<unsigned>&)>& each) {
  // Each group goes to no block, to a block already opened or to a new one; blocks are numbered in
  // order of first use, so each set partition comes once.
  std::vector<unsigned> masks;
  bool go_on = true;
  std::function<void(int)> assign = [&](int g) {
    if (!go_on) return;
    if (g == groups) {
      if (!masks.empty()) go_on = each(masks);
      return;
    }
    assign(g + 1);
    for (size_t b = 0; b < masks.size(); ++b) {
      masks[b] |= 1u << g;
      assign(g + 1);
      masks[b] &= ~(1u << g);
    }
    if (static_cast<int>(masks.size()) < max_classes) {
      masks.push_back(1u << g);
      assign(g + 1);
      masks.pop_back();
    }
  };
  assign(0);
}

std::vector<std::vector<int>> tensor_parallel_combinations(const Cluster& groups, const Model& model,
                                                           const std::vector<int>& order, int replicas) {
  std::vector<std::vector<int>> options;
  std::vector<size_t> sizes;
  for (int g : order) {
    options.push_back(tensor_parallel_options(groups.nodes[g], model, groups.nodes[g].devices() / replicas));
    sizes.push_back(options.back().size());
  }
  std::vector<std::vector<int>> combinations;
  for_each_pick(sizes, [&](const std::vector<size_t>& pick) {
    std::vector<int> tps;
    for (size_t i = 0; i < pick.size(); ++i) tps.push_back(options[i][pick[i]]);
    combinations.push_back(std::move(tps));
    return true;
  });
  return combinations;
}

ClassLayout even_class_layout(const Cluster& groups, const std::vector<int>& order, const std::vector<int>& tps,
                              int replicas) {
  ClassLayout layout;
  layout.replicas = replicas;
  for (size_t i = 0; i < order.size(); ++i)
    layout.segments.push_back({order[i], tps[i], groups.nodes[order[i]].devices() / replicas / tps[i]});
  return layout;
}

int layer_holders(const std::vector<PartitionedClass>& classes) {
  int holders = 0;
  for (const PartitionedClass& c : classes) holders += c.layout.replicas;
  return holders;
}

}  // namespace h2::heteroauto
