// NIC discovery: the decoding rules and the assembly of the three sources (rdma-core, the kernel,
// libfabric). Each source lives in its own file: nics_rdma.cpp, nics_net.cpp, nics_fabric.cpp.
#include "h2/dicomm/nics.hpp"

#include <infiniband/verbs.h>
#include <net/if.h>
#include <net/if_arp.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>

#include "nics_internal.hpp"

namespace h2::dicomm {

const char* link_layer_name(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::infiniband: return "InfiniBand";
    case LinkLayer::roce: return "RoCE";
    case LinkLayer::ethernet: return "Ethernet";
    case LinkLayer::loopback: return "loopback";
    default: return "unknown";
  }
}

namespace detail {

double ib_lane_gbps(uint32_t speed) {
  // The PortInfo:LinkSpeedActive / LinkSpeedExtActive encodings as rdma-core reports them
  // (ibv_query_port(3), ibv_devinfo's speed_str). These are signalling rates per lane, the figures
  // ibstat and NCCL use (FDR 14 and EDR 25 include the 64b/66b overhead; QDR 10 the 8b/10b one).
  switch (speed) {
    case 1: return 2.5;      // SDR
    case 2: return 5.0;      // DDR
    case 4: return 10.0;     // QDR
    case 8: return 10.0;     // FDR10 (FDR signalling at QDR's rate, Mellanox)
    case 16: return 14.0;    // FDR
    case 32: return 25.0;    // EDR
    case 64: return 50.0;    // HDR
    case 128: return 100.0;  // NDR
    case 256: return 200.0;  // XDR: does not fit the 8-bit active_speed, only active_speed_ex
    default: return 0;
  }
}

int ib_width_lanes(uint32_t width) {
  // PortInfo:LinkWidthActive: 1x, 4x, 8x, 12x, and 2x (added for HDR/NDR split ports).
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

double ib_port_gbps(uint32_t speed, uint32_t width) {
  return ib_lane_gbps(speed) * ib_width_lanes(width);
}

LinkLayer rdma_link_layer(int link_layer, int transport_type) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND: return LinkLayer::infiniband;
    case IBV_LINK_LAYER_ETHERNET: return transport_type == IBV_TRANSPORT_IWARP ? LinkLayer::ethernet : LinkLayer::roce;
    case IBV_LINK_LAYER_UNSPECIFIED:
      return transport_type == IBV_TRANSPORT_IB ? LinkLayer::infiniband : LinkLayer::unknown;
    default: return LinkLayer::unknown;
  }
}

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

long long sysfs_number(std::string_view text) {
  text = trim(text);
  int base = 10;
  if (text.starts_with("0x") || text.starts_with("0X")) {
    base = 16;
    text.remove_prefix(2);
  }
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return -1;
  return value;
}

double sysfs_speed_gbps(std::string_view text) {
  const long long mbps = sysfs_number(text);
  // SPEED_UNKNOWN is -1; some drivers have written 65535 (u16 -1) or 4294967295 (u32 -1) instead.
  if (mbps <= 0 || mbps == 65535 || mbps == 4294967295LL) return 0;
  return static_cast<double>(mbps) / 1000.0;
}

bool interface_up(std::string_view operstate, unsigned flags) {
  operstate = trim(operstate);
  if (operstate == "up") return true;
  if (operstate == "unknown" || operstate.empty()) return (flags & IFF_UP) && (flags & IFF_RUNNING);
  return false;  // down, dormant, lowerlayerdown, notpresent, testing
}

LinkLayer interface_link_layer(long long type, unsigned flags) {
  if ((flags & IFF_LOOPBACK) || type == ARPHRD_LOOPBACK) return LinkLayer::loopback;
  if (type == ARPHRD_ETHER) return LinkLayer::ethernet;
  if (type == ARPHRD_INFINIBAND) return LinkLayer::infiniband;
  return LinkLayer::unknown;
}

bool domain_names_nic(const Nic& nic, std::string_view domain) {
  if (!nic.rdma) return domain == nic.name;
  const std::string_view name = nic.name;
  const std::string_view device = name.substr(0, name.find('/'));
  return domain == device ||
         (domain.size() > device.size() && domain.starts_with(device) && domain[device.size()] == '-');
}

void attach_provider(std::vector<Nic>& nics, std::string_view domain, const std::string& provider) {
  for (Nic& nic : nics)
    if (domain_names_nic(nic, domain) &&
        std::find(nic.providers.begin(), nic.providers.end(), provider) == nic.providers.end())
      nic.providers.push_back(provider);
}

std::string read_sysfs_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return {};
  return line;
}

}  // namespace detail

NicDiscovery discover_nics() {
  NicDiscovery discovery;
  discovery.nics = detail::discover_rdma_ports(discovery.rdma_status);
  std::vector<Nic> interfaces = detail::discover_interfaces();
  // An RDMA port carries the addresses of its netdev: RoCE traffic is addressed by them, and the
  // operator matches ports to the addresses a job was given.
  for (Nic& port : discovery.nics) {
    const auto netdev =
        std::find_if(interfaces.begin(), interfaces.end(), [&](const Nic& n) { return n.name == port.netdev; });
    if (!port.netdev.empty() && netdev != interfaces.end()) port.addresses = netdev->addresses;
  }
  discovery.nics.insert(discovery.nics.end(), std::make_move_iterator(interfaces.begin()),
                        std::make_move_iterator(interfaces.end()));
  detail::discover_libfabric(discovery);
  return discovery;
}

}  // namespace h2::dicomm
