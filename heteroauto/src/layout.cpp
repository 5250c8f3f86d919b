// The free functions of layout.hpp: canonical node groups and the options a layout may take.
#include <algorithm>
#include <tuple>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {

namespace {

auto identity(const NodeGroup& g) {
  return std::tie(g.device_type, g.devices_per_node, g.intra_node_bandwidth_gbps, g.intra_node_latency_us, g.nic,
                  g.nics_per_node, g.cluster);
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
    if (group.devices_per_node % tp != 0 || model.heads % tp != 0 || model.ffn % tp != 0) continue;
    if (model.kv_heads % tp != 0 && tp % model.kv_heads != 0) continue;
    tps.push_back(tp);
  }
  return tps;
}

std::vector<int> replica_options(const Cluster& groups, const std::vector<int>& block, int micro_batches) {
  auto devices = [&](int g) { return groups.nodes[g].count * groups.nodes[g].devices_per_node; };
  int smallest = micro_batches;
  for (int g : block) smallest = std::min(smallest, devices(g));
  std::vector<int> options;
  for (int r = 1; r <= smallest; ++r) {
    bool divides = micro_batches % r == 0;
    for (int g : block) divides = divides || devices(g) % r == 0;
    if (divides) options.push_back(r);
  }
  return options;
}

}  // namespace h2::heteroauto
