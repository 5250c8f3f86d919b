// `--plugin-option PLUGIN:KEY=VALUE` (repeatable): plugin options (ABI 1.4) on the command line of the
// commands that load plugins, and the same arguments again on the command line of the ranks they
// start, so a rank is configured by its arguments, not by variables set in the launcher's environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "h2/runtime.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace h2::tools {

using PluginOptionsByName = std::map<std::string, PluginOptions>;

// Adds the repeatable --plugin-option to `command`, collecting its raw values into `specs`.
CLI::Option* add_plugin_option_flag(CLI::App* command, std::vector<std::string>& specs);

// "cpu-reference:memory=1GiB" entries -> {"cpu-reference": {"memory": "1GiB"}}. Throws
// std::invalid_argument naming the entry when it is not PLUGIN:KEY=VALUE, or when a key is given twice.
PluginOptionsByName parse_plugin_options(const std::vector<std::string>& specs);

// `overrides` laid over `defaults`, key by key: what a user passes wins over what a tool derives.
PluginOptionsByName merge_plugin_options(PluginOptionsByName defaults, const PluginOptionsByName& overrides);

// {"--plugin-option", "cpu-reference:memory=1GiB", ...}: `options` as arguments for a rank's command line.
std::vector<std::string> plugin_option_args(const PluginOptionsByName& options);

}  // namespace h2::tools
