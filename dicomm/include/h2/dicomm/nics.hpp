// The network interfaces of this node, as the fabric and the planner see them: RDMA devices and
// their ports through rdma-core (link layer InfiniBand, RoCE or Ethernet; speed), IP interfaces
// through the kernel, and which libfabric providers can reach each.
#pragma once

#include <string>
#include <vector>

namespace h2::dicomm {

enum class LinkLayer { infiniband, roce, ethernet, loopback, unknown };
// "InfiniBand", "RoCE", "Ethernet", "loopback", "unknown"
const char* link_layer_name(LinkLayer layer);

struct Nic {
  std::string name;    // "mlx5_0/1" (RDMA device/port) or "eth0" (IP interface)
  std::string netdev;  // an RDMA port's IP interface (RoCE netdev, IPoIB), "" when none and for IP interfaces
  LinkLayer link_layer = LinkLayer::unknown;
  double speed_gbps = 0;               // 0: unknown
  bool up = false;                     // port active / interface up and running
  std::vector<std::string> addresses;  // IPv4/IPv6 addresses of the interface (an RDMA port: of its netdev)
  std::vector<std::string> providers;  // libfabric providers that offer a domain on it ("verbs;ofi_rxm", "tcp;ofi_rxm")
  bool rdma = false;                   // an rdma-core device port
};

struct NicDiscovery {
  std::vector<Nic> nics;
  // Why rdma-core listed no devices ("ibv_get_device_list: Function not implemented" on a kernel
  // without RDMA), or which devices or ports it could not query; "" when it listed and queried all.
  std::string rdma_status;
  // fi_version() of the libfabric loaded at run time, "major.minor" ("1.17"): the API version is
  // all libfabric reports at run time, and ranks must agree on it.
  std::string libfabric_version;
  std::vector<std::string> providers;  // every RDM provider libfabric offers here, first-seen order
  // Why fi_getinfo listed no RDM provider ("fi_getinfo: No data available"), "" when it listed some.
  std::string libfabric_status;
};

// RDMA ports first (by device, then port), then IP interfaces by interface index. Never throws for a
// missing RDMA stack or an unusable libfabric: those are reported in rdma_status and libfabric_status.
NicDiscovery discover_nics();

}  // namespace h2::dicomm
