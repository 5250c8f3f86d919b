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

}  // namespace h2::heteroauto
