// A cluster description's device-direct facts (device_direct_rdma, device_direct_collectives) held
// against what DiComm would do with this machine's plugins: where the description says a transfer
// goes device-direct and DiComm would stage it, HeteroAuto's plan was made for faster transfers than
// the job will have, and its predicted step time is optimistic.
#pragma once

#include <string>
#include <vector>

#include "h2/h2.hpp"
#include "h2/heteroauto/description.hpp"

namespace h2::tools {

// One sentence per disagreement, naming the description's field, the vendor, the plugin and why
// DiComm stages. Device types without a "plugin", or whose plugin has no device here, are not held
// to anything (nothing here says how their memory would move), nor those only on Ethernet NICs
// (the plan stages those). Throws dicomm::CommError(usage) for an H2_DICOMM_* setting DiComm does
// not know.
std::vector<std::string> device_direct_disagreements(const heteroauto::Cluster& cluster, const Runtime& runtime);

// Whether the description says any transfer goes device-direct (nothing to check otherwise).
bool claims_device_direct(const heteroauto::Cluster& cluster);

}  // namespace h2::tools
