#include "local_cluster.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace h2::tools {

void export_simulated_devices(const heteropp::LocalDevices& devices, int ranks) {
  const auto it = devices.memory_gib.find("cpu-reference");
  if (it == devices.memory_gib.end()) return;
  std::string memory;
  for (double gib : it->second)
    memory += (memory.empty() ? "" : ",") + std::to_string(static_cast<int64_t>(gib * 1024)) + "MiB";
  setenv("H2_CPU_REFERENCE_MEMORY", memory.c_str(), 0);
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, ranks));
  setenv("H2_CPU_REFERENCE_THREADS", std::to_string(threads).c_str(), 0);
}

std::string self_executable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("h2") : self.string();
}

}  // namespace h2::tools
