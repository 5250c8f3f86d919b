// `h2 devices`: every plugin found, its ABI version and status, and its devices with properties.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct DevicesOptions {
  bool json = false;
  std::vector<std::string> plugins;  // NAME or PATH; empty: every plugin in the search path
};

void add_devices_command(CLI::App& app, DevicesOptions& options, int& exit_code);

// Prints the listing; returns the process exit code (0 when every requested plugin is usable or,
// without --plugin, when no plugin found is broken and at least one loaded).
int run_devices(const DevicesOptions& options);

}  // namespace h2::tools
