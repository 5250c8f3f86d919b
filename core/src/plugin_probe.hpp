// Loading a plugin in a child process before loading it in this one, so that a plugin which crashes,
// calls exit or hangs while it loads (its constructors, h2_plugin_get_api, initialize or the first
// device queries) is listed with what happened instead of taking the whole tool down.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "h2/runtime.hpp"

namespace h2::detail {

// The seconds a probe may take: H2_PLUGIN_PROBE_TIMEOUT (default 60: a GPU runtime's first
// initialization can take seconds); 0 turns probing off. A bad value is an h2::Error naming it.
double plugin_probe_timeout();

// Loads `path` in a child process (h2::run_in_child), with the `options` it will be loaded with here:
// a plugin may crash or hang only with some settings. Returns the PluginInfo to list in its place when
// the child crashed, exited or timed out; nullopt when loading returned there (whatever the state it
// reported), so that it may be loaded here.
std::optional<PluginInfo> probe_plugin(const std::filesystem::path& path,
                                       const std::map<std::string, PluginOptions>& options, double timeout_seconds);

}  // namespace h2::detail
