// How this process's settings make DiComm move a device's memory: the point-to-point path with
// H2_DICOMM_STAGING, and which library a data-parallel sum among one plugin's devices on several
// nodes would run on (vendor_path.cpp decides the same for a live communicator).
#include "h2/dicomm/data_paths.hpp"
#include "h2/plugin_comm.hpp"
#include "world_settings.hpp"

namespace h2::dicomm {

namespace {

DeviceMemoryPath memory_path(const Device& device, const detail::WorldSettings& settings) {
  if (settings.force_staging) return {false, "staged through pinned host memory: H2_DICOMM_STAGING=1 asks for it"};
  return device_memory_path(device.properties());
}

}  // namespace

DeviceMemoryPath device_memory_path(const Device& device) {
  return memory_path(device, detail::read_world_settings({}));
}

CollectivePath collective_path(const Device& device) {
  const detail::WorldSettings settings = detail::read_world_settings({});  // read once for both answers
  const DeviceMemoryPath own = memory_path(device, settings);
  const auto dicomm = [&](const std::string& because) {
    return CollectivePath{own.direct, false, "DiComm's own algorithms (" + because + "), " + own.why};
  };
  if (!settings.vendor_collectives) return dicomm("H2_DICOMM_VENDOR_COLLECTIVES is off, the default");
  const std::optional<CollectiveLibrary> library = PluginComm::library(device);
  if (!library) return dicomm("the plugin has no collective library");
  if (library->scope == CommScope::node) return dicomm(library->name + " reaches one node only");
  return {true, true, library->name + ", the plugin's collective library, between nodes too"};
}

}  // namespace h2::dicomm
