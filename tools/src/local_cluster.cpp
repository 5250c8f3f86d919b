#include "local_cluster.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace h2::tools {

PluginOptionsByName simulated_device_options(const heteropp::LocalDevices& devices, size_t ranks,
                                             std::optional<double> threads_per_device) {
  const auto it = devices.memory_gib.find("cpu-reference");
  if (it == devices.memory_gib.end()) return {};
  std::string memory;
  for (double gib : it->second)
    memory += (memory.empty() ? "" : ",") + std::to_string(static_cast<int64_t>(gib * 1024)) + "MiB";
  const size_t threads = threads_per_device
                             ? static_cast<size_t>(std::max(1.0, *threads_per_device))
                             : std::max<size_t>(1, std::thread::hardware_concurrency() / std::max<size_t>(1, ranks));
  return {{"cpu-reference", {{"memory", memory}, {"threads", std::to_string(threads)}}}};
}

std::optional<heteroauto::SharedHost> simulated_host(const heteroauto::Cluster& cluster,
                                                     const PluginOptionsByName& plugin_options) {
  heteroauto::SharedHost host;
  for (const heteroauto::NodeGroup& g : cluster.nodes)
    if (cluster.device_type(g.device_type).plugin == "cpu-reference") host.node_groups.push_back(g.name);
  if (host.node_groups.empty()) return std::nullopt;
  host.cores = std::max(1u, std::thread::hardware_concurrency());
  const auto options = plugin_options.find("cpu-reference");
  if (options != plugin_options.end())
    if (const auto threads = options->second.find("threads"); threads != options->second.end())
      host.threads_per_device = std::max(1.0, std::strtod(threads->second.c_str(), nullptr));
  return host;
}

std::string self_executable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("h2") : self.string();
}

}  // namespace h2::tools
