#include "device_direct_check.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "h2/dicomm/data_paths.hpp"

namespace h2::tools {

namespace {

// How DiComm would move one plugin's memory, found from its first device.
struct PluginPaths {
  dicomm::DeviceMemoryPath point_to_point;
  dicomm::CollectivePath collectives;
};

std::optional<PluginPaths> paths_of(const Runtime& runtime, const std::string& plugin) {
  const auto loaded = std::find_if(runtime.plugins().begin(), runtime.plugins().end(),
                                   [&](const PluginInfo& info) { return info.name == plugin && info.loaded(); });
  if (loaded == runtime.plugins().end()) return std::nullopt;
  const std::vector<Device> devices = runtime.devices(plugin);
  if (devices.empty()) return std::nullopt;
  return PluginPaths{dicomm::device_memory_path(devices.front()), dicomm::collective_path(devices.front())};
}

}  // namespace

bool claims_device_direct(const heteroauto::Cluster& cluster) {
  return std::any_of(cluster.device_types.begin(), cluster.device_types.end(), [&](const auto& a) {
    return std::any_of(cluster.device_types.begin(), cluster.device_types.end(), [&](const auto& b) {
      return cluster.device_direct(a.vendor, b.vendor) || cluster.collectives_direct(a.vendor, b.vendor);
    });
  });
}

std::vector<std::string> device_direct_disagreements(const heteroauto::Cluster& cluster, const Runtime& runtime) {
  std::map<std::string, std::optional<PluginPaths>> by_plugin;
  const auto paths = [&](const heteroauto::DeviceType& type) -> const std::optional<PluginPaths>& {
    auto found = by_plugin.find(type.plugin);
    if (found == by_plugin.end())
      found = by_plugin.emplace(type.plugin, type.plugin.empty() ? std::nullopt : paths_of(runtime, type.plugin)).first;
    return found->second;
  };
  std::vector<std::string> found;
  std::set<std::string> said;  // one sentence per field, vendor and plugin, however many types share them
  const auto say = [&](const std::string& sentence) {
    if (said.insert(sentence).second) found.push_back(sentence);
  };
  for (const heteroauto::DeviceType& a : cluster.device_types) {
    const std::optional<PluginPaths>& here = paths(a);
    // Plain Ethernet is staged in the plan whatever the description says: nothing to warn of.
    const bool on_rdma = std::any_of(cluster.nodes.begin(), cluster.nodes.end(), [&](const heteroauto::NodeGroup& g) {
      return g.device_type == a.name && cluster.nic(g.nic).kind != heteroauto::NicKind::ethernet;
    });
    if (!here || !on_rdma) continue;
    for (const heteroauto::DeviceType& b : cluster.device_types) {
      if (cluster.device_direct(a.vendor, b.vendor) && !here->point_to_point.direct)
        say("device_direct_rdma pairs " + a.vendor + " with " + b.vendor + ", but plugin " + a.plugin +
            "'s memory is " + here->point_to_point.why);
    }
    if (cluster.collectives_direct(a.vendor, a.vendor) && !here->collectives.direct)
      say(std::string(cluster.device_direct_collectives ? "device_direct_collectives lists "
                                                        : "device_direct_rdma pairs (and so the collectives of) ") +
          a.vendor + ", but plugin " + a.plugin + "'s sums between nodes run on " + here->collectives.why);
  }
  return found;
}

}  // namespace h2::tools
