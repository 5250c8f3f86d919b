// `h2 devices`: every plugin found, its ABI version and status, and its devices with properties.
// `h2 devices --nics`: the node's network interfaces instead (RDMA ports, IP interfaces, libfabric
// providers), and the planner's nic_types for them.
// `h2 devices --plugin NAME --options`: the plugin's option keys instead (devices_options.hpp).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct DevicesOptions {
  bool json = false;
  std::vector<std::string> plugins;         // NAME or PATH; empty: every plugin in the search path
  bool nics = false;                        // list NICs instead of plugins and devices
  bool options = false;                     // list the option keys of the --plugin plugins instead
  std::vector<std::string> plugin_options;  // --plugin-option PLUGIN:KEY=VALUE
};

void add_devices_command(CLI::App& app, DevicesOptions& options, int& exit_code);

// Prints the listing; returns the process exit code (0 when every requested plugin is usable or,
// without --plugin, when no plugin found is broken and at least one loaded).
int run_devices(const DevicesOptions& options);

// `h2 devices --nics`: returns 0 once discovery ran, with or without RDMA or libfabric providers
// (their absence is reported, not an error).
int run_nics(bool json);

}  // namespace h2::tools
