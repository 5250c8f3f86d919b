// The one part of route choice that looks at this machine: which NIC each libfabric domain is,
// and how fast.
#include <algorithm>

#include "h2/dicomm/nics.hpp"
#include "nics/nics_internal.hpp"
#include "routes.hpp"

namespace h2::dicomm::detail {

std::vector<Network> local_networks(std::vector<Network> offered, const std::string& store_interface,
                                    const std::map<std::string, double>& speeds, const std::string& requested) {
  // The NICs' speeds and kinds only: libfabric's offer is `offered` already (no second fi_getinfo).
  std::string rdma_status;
  std::vector<Nic> nics = discover_rdma_ports(rdma_status);
  for (Nic& nic : discover_interfaces()) nics.push_back(std::move(nic));
  std::vector<Network> networks;
  for (Network& network : offered) {
    if (!known_provider(network.provider) && network.provider != requested) continue;
    for (const Nic& nic : nics) {
      if (!domain_names_nic(nic, network.domain)) continue;
      network.gbps = nic.speed_gbps;
      network.loopback = nic.link_layer == LinkLayer::loopback;
      break;
    }
    // A user's figure wins, by interface or RDMA device name.
    if (const auto it = speeds.find(network.domain); it != speeds.end()) network.gbps = it->second;
    network.reaches_store = !store_interface.empty() && network.domain == store_interface;
    const auto same =
        std::find_if(networks.begin(), networks.end(), [&](const Network& n) { return n.key() == network.key(); });
    if (same == networks.end())
      networks.push_back(network);
    else if (network.gbps > same->gbps)
      *same = network;
  }
  return networks;
}

}  // namespace h2::dicomm::detail
