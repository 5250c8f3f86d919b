// Loading one plugin file: every way it can fail gets its own PluginState and message.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
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
// Runtime in the process) shares that instance instead of initializing the plugin twice; asked for
// with other options then, it fails (init_failed) rather than run with options it was not given.
// `options` are RuntimeOptions::plugin_options: the entry of the plugin's own name is passed to it.
LoadedPlugin load_plugin(const std::filesystem::path& path, const std::map<std::string, PluginOptions>& options);
// Whether `path` is loaded in this process now (load_plugin would share it, not load it again).
bool plugin_is_live(const std::filesystem::path& path);

// The library of a plugin file, opened, with its table read and its version checked, before
// initialize: what loading and listing options share. `table` points into the library.
struct OpenedPlugin {
  PluginInfo info;                // name, version and ABI when read; state and message on failure
  std::shared_ptr<void> library;  // null when opening failed (info says why)
  const H2_PluginApi* table = nullptr;
};
OpenedPlugin open_plugin(const std::filesystem::path& path);

// A PluginInfo message: "<state>: <detail>", so each message reads on its own ("ABI mismatch (plugin
// 2.0, core 1.0): ..."); a detail that already starts with the state's name is kept as it is.
std::string state_message(PluginState state, const std::string& detail);

// Converts the ABI's properties into the C++ struct.
DeviceProperties to_device_properties(const H2_DeviceProperties& props);

}  // namespace h2::detail
