// How DiComm would move a device's memory between nodes, as this build and this process's settings
// run it: what `h2 devices --nics` reports and what `h2 train` holds a cluster description's
// device-direct facts against (HeteroAuto charges staging where the description says so).
#pragma once

#include <string>

#include "h2/device.hpp"

namespace h2::dicomm {

// Point-to-point transfers (and DiComm's own collective steps) over libfabric: the NIC reads and
// writes the memory where it lies (device-direct), or DiComm stages it through pinned host buffers,
// a copy each way. `why` says which and why, in words.
struct DeviceMemoryPath {
  bool direct = false;
  std::string why;
};
DeviceMemoryPath device_memory_path(const DeviceProperties& properties);
// The same for `device` as this process's settings make it: H2_DICOMM_STAGING=1 stages every
// device's memory. Throws CommError(usage) for a DiComm setting it does not know, as a rank would.
DeviceMemoryPath device_memory_path(const Device& device);

// Collectives among devices of `device`'s plugin on several nodes (a data-parallel sum): on the
// plugin's collective library where H2_DICOMM_VENDOR_COLLECTIVES allows it and the library reaches
// across nodes (the library then moves the memory as the vendor's hardware lets it: device-direct
// in H2's terms), else on DiComm's own algorithms, as device_memory_path says. Reads the H2_DICOMM_*
// settings; throws CommError(usage) for one it does not know, as a rank would.
struct CollectivePath {
  bool direct = false;
  bool vendor_library = false;  // the plugin's library carries the transfers between nodes
  std::string why;
};
CollectivePath collective_path(const Device& device);

}  // namespace h2::dicomm
