// Running a described cluster's devices as local processes: what `h2 train` and `h2 profile` share.
#pragma once

#include <string>

#include "h2/heteropp/placement.hpp"

namespace h2::tools {

// For cpu-reference devices: one simulated device per cluster device with its memory
// (H2_CPU_REFERENCE_MEMORY) and the machine's cores shared out over `ranks` processes
// (H2_CPU_REFERENCE_THREADS); a variable the caller has set is left alone. Children inherit both.
void export_simulated_devices(const heteropp::LocalDevices& devices, int ranks);

// This program's path, to start its own ranks ("h2" from PATH when /proc is not there).
std::string self_executable();

}  // namespace h2::tools
