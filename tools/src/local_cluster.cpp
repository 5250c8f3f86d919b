#include "local_cluster.hpp"

#include <algorithm>
#include <filesystem>
#include <thread>

namespace h2::tools {

PluginOptionsByName simulated_device_options(const heteropp::LocalDevices& devices, size_t ranks) {
  const auto it = devices.memory_gib.find("cpu-reference");
  if (it == devices.memory_gib.end()) return {};
  std::string memory;
  for (double gib : it->second)
    memory += (memory.empty() ? "" : ",") + std::to_string(static_cast<int64_t>(gib * 1024)) + "MiB";
  const size_t threads = std::max<size_t>(1, std::thread::hardware_concurrency() / std::max<size_t>(1, ranks));
  return {{"cpu-reference", {{"memory", memory}, {"threads", std::to_string(threads)}}}};
}

std::string self_executable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("h2") : self.string();
}

}  // namespace h2::tools
