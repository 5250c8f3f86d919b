// Loading one plugin file: every way it can fail gets its own PluginState and message.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "h2/device.hpp"
#include "h2/runtime.hpp"
#include "plugin_handle.hpp"

namespace h2::detail {

struct LoadedPlugin {
  PluginInfo info;
  std::shared_ptr<PluginHandle> handle;   // null unless info.loaded()
  std::vector<DeviceProperties> devices;  // one per device, when loaded
};

// Never throws for a bad plugin: the result's info says what went wrong. A plugin stays loaded and
// initialized while anything of it is alive, and loading the same file again meanwhile (a second
// Runtime in the process) shares that instance instead of initializing the plugin twice.
LoadedPlugin load_plugin(const std::filesystem::path& path);
// Whether `path` is loaded in this process now (load_plugin would share it, not load it again).
bool plugin_is_live(const std::filesystem::path& path);

// A PluginInfo message: "<state>: <detail>", so each message reads on its own ("ABI mismatch (plugin
// 2.0, core 1.0): ..."); a detail that already starts with the state's name is kept as it is.
std::string state_message(PluginState state, const std::string& detail);

// Converts the ABI's properties into the C++ struct.
DeviceProperties to_device_properties(const H2_DeviceProperties& props);

}  // namespace h2::detail
