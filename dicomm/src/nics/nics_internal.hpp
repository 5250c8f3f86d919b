// NIC discovery's parts (rdma-core, the kernel's interfaces, libfabric) and the pure decoding rules
// they use, exposed here so that the rules are unit-tested without the hardware they describe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "h2/dicomm/nics.hpp"

namespace h2::dicomm::detail {

// ---- InfiniBand port speed (ibv_query_port's active_speed / active_speed_ex and active_width) ----

// Per-lane signalling rate in Gbit/s for an IB speed encoding (a single bit): 1 SDR 2.5, 2 DDR 5,
// 4 QDR 10, 8 FDR10 10, 16 FDR 14, 32 EDR 25, 64 HDR 50, 128 NDR 100, 256 XDR 200 (XDR only fits
// active_speed_ex). 0 for an encoding this table does not know.
double ib_lane_gbps(uint32_t speed);
// Lanes for an IB width encoding: 1 → 1x, 2 → 4x, 4 → 8x, 8 → 12x, 16 → 2x. 0 when unknown.
int ib_width_lanes(uint32_t width);
// The port's rate, lane rate × lanes, as ibstat's "Rate" (HDR 4x → 200). 0 when either is unknown.
double ib_port_gbps(uint32_t speed, uint32_t width);

// The link layer of an rdma-core port from ibv_port_attr::link_layer (IBV_LINK_LAYER_*) and the
// device's ibv_transport_type: Ethernet under an IB transport is RoCE, under iWARP it is plain
// Ethernet; "unspecified" is what drivers older than link_layer reported for InfiniBand.
LinkLayer rdma_link_layer(int link_layer, int transport_type);

// ---- the kernel's interfaces (/sys/class/net/<if>/...) ----

// /sys/class/net/<if>/speed in Mb/s → Gbit/s. The kernel writes -1 (or fails the read, "") when the
// driver does not know (no carrier, virtual devices); those, and anything not a number, are 0.
double sysfs_speed_gbps(std::string_view text);
// A decimal or 0x-hexadecimal sysfs number ("0x1003", "772"); -1 when the text is not one.
long long sysfs_number(std::string_view text);
// Up and running: operstate "up", or "unknown" (drivers that never set it, the loopback among them;
// the kernel's operstates.rst says to treat it as usable) with IFF_UP and IFF_RUNNING in `flags`.
bool interface_up(std::string_view operstate, unsigned flags);
// IFF_LOOPBACK or ARPHRD_LOOPBACK → loopback, ARPHRD_ETHER → Ethernet, ARPHRD_INFINIBAND (IPoIB)
// → InfiniBand, anything else (tunnels, wireguard, can) → unknown. `type` -1: not known.
LinkLayer interface_link_layer(long long type, unsigned flags);

// ---- libfabric ----

// Whether a libfabric domain name names this NIC: an IP interface by its name (socket providers
// name domains after interfaces); an RDMA port by its device, which verbs and efa use as the domain
// name, possibly with a suffix for an endpoint flavour ("mlx5_0-xrc", "rdmap0s31-rdm").
bool domain_names_nic(const Nic& nic, std::string_view domain);
// Adds `provider` to every NIC the domain names, once.
void attach_provider(std::vector<Nic>& nics, std::string_view domain, const std::string& provider);

// ---- the parts of discover_nics() ----

// rdma-core's devices and ports; `status` says why there are none, or what could not be queried.
std::vector<Nic> discover_rdma_ports(std::string& status);
// The IP interfaces of this network namespace, by interface index.
std::vector<Nic> discover_interfaces();
// libfabric's RDM + tagged providers: fills version, providers and libfabric_status, and attaches
// each provider to the NICs its domains name.
void discover_libfabric(NicDiscovery& discovery);

// The first line of a sysfs file, "" when it is absent or its read fails (the kernel answers EINVAL
// for attributes the driver cannot report, such as the speed of a loopback).
std::string read_sysfs_line(const std::string& path);

}  // namespace h2::dicomm::detail
