// Running a described cluster's devices as local processes: what `h2 train` and `h2 profile` share.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "h2/heteropp/placement.hpp"
#include "plugin_option_args.hpp"

namespace h2::tools {

// The plugin options that make this machine hold the cluster's devices: for cpu-reference, one
// simulated device per cluster device with its memory ("memory") and the machine's cores shared out
// over `ranks` processes ("threads"). Passed to every rank in its job file (train_job.hpp),
// they override the plugin's H2_CPU_REFERENCE_MEMORY and H2_CPU_REFERENCE_THREADS; --plugin-option
// overrides them in turn (merge_plugin_options). `threads_per_device`, where given, replaces the
// share of the cores (a profile's, so that ranks compute as they were measured).
PluginOptionsByName simulated_device_options(const heteropp::LocalDevices& devices, size_t ranks,
                                             std::optional<double> threads_per_device = std::nullopt);

// The cluster's devices that compute on this machine's cores (its cpu-reference groups), with the
// threads each gets from `plugin_options` (as simulated_device_options and the user set them); none
// when no group is simulated here.
std::optional<heteroauto::SharedHost> simulated_host(const heteroauto::Cluster& cluster,
                                                     const PluginOptionsByName& plugin_options);

// This program's path, to start its own ranks ("h2" from PATH when /proc is not there).
std::string self_executable();

}  // namespace h2::tools
