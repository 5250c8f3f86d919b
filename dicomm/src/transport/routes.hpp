// Which network carries the messages between two ranks: one transport per link, as Holmes chooses
// NICs. Each rank lists the networks it can reach, one libfabric provider on one fabric through
// one of its NICs; a pair of ranks uses the best network both list. So ranks of an InfiniBand
// island talk over verbs while the island reaches an Ethernet island over tcp, and two hosts joined
// by a fast and a slow network use the fast one, instead of one provider (and one interface) for
// the whole job.
//
// The choice is a pure function of what the two ranks published, so both ends of a pair pick the
// same network without another round through the store.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace h2::dicomm::detail {

struct Network {
  std::string provider;  // "tcp;ofi_rxm", "verbs;ofi_rxm", "shm"
  // libfabric's fabric name: an IP subnet for socket providers ("198.18.1.0/24"), the InfiniBand
  // subnet for verbs. Two ranks that list one provider on one fabric reach each other through it.
  std::string fabric;
  std::string domain;          // this rank's NIC on it: an interface ("eth0"), an RDMA device ("mlx5_0"), "shm"
  double gbps = 0;             // the NIC's speed; 0: unknown
  bool loopback = false;       // reaches this node only (lo)
  bool reaches_store = false;  // the interface this rank reaches the rendezvous store through

  // What two ranks must both list to use it: "tcp;ofi_rxm 198.18.1.0/24".
  std::string key() const { return provider + " " + fabric; }
  // "tcp;ofi_rxm on eth0", "shm".
  std::string describe() const;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Network, provider, fabric, domain, gbps, loopback, reaches_store)

struct RankNetworks {
  std::string node;  // ranks of one node may use shm and loopback networks between them
  std::vector<Network> networks;
  // H2_DICOMM_ISLAND: ranks with different labels use no RDMA network between them. InfiniBand
  // fabrics often share one name (the default subnet prefix, "IB-0xfe80000000000000"), and EFA's
  // is always "efa", so a name alone does not tell two disconnected islands apart.
  std::string island;
};

struct RouteRules {
  std::string provider;  // H2_FABRIC_PROVIDER: only this provider; "": any DiComm knows
  bool shm_safe = true;  // libfabric's shm may be used (see shm_is_safe in world.cpp)
};

// Whether DiComm would use `provider` at all: shm, verbs;ofi_rxm, efa, cxi, tcp;ofi_rxm, net, tcp.
bool known_provider(const std::string& provider);

// The network ranks `a` and `b` use between them: indices into a.networks and b.networks, or
// {-1, -1} where they share none. A shared network is one both list by one key, or, for nodes on
// routed subnets that list none alike, the socket networks (one provider and address family) both
// reach the store through: reaching the store proves the route, as it did when one interface served
// the job. Symmetric: swapping a and b swaps the indices. Better is, in order: shm, then a loopback
// network, between ranks of one node; an RDMA provider over sockets (verbs, efa, cxi, then
// tcp;ofi_rxm, net, tcp); the faster NIC of the slower end; IPv4; the network both reach the store
// through; the smaller names.
std::pair<int, int> choose_route(const RankNetworks& a, const RankNetworks& b, const RouteRules& rules);

// How fast the link between ranks `a` and `b` is, in Gbit/s, for grouping ranks into islands: without
// limit between ranks of one node (the node transport, or shm), else the speed of their route's
// slower end; 0 where the NICs report no speed or the two share no network.
double link_gbps(const RankNetworks& a, const RankNetworks& b, const RouteRules& rules);
// For rank `rank`, each rank's network: an index into ranks[rank].networks, -1 for itself and for
// `skip` (peers the node transport carries). Throws CommError(usage) naming a peer it shares no
// network with, and what each of them has.
std::vector<int> choose_routes(const std::vector<RankNetworks>& ranks, int rank, const RouteRules& rules,
                               const std::vector<bool>& skip);

// This rank's networks from libfabric's offer (`offered`, probe_providers): each NIC's speed from
// NIC discovery unless `speeds` names it (H2_DICOMM_NIC_GBPS), loopback interfaces marked, the one
// named `store_interface` marked as reaching the store. Providers DiComm does not use are left out,
// and of networks with one key (two NICs on one subnet) the fastest stays.
// `requested` (H2_FABRIC_PROVIDER) is kept even where DiComm would not choose it itself.
std::vector<Network> local_networks(std::vector<Network> offered, const std::string& store_interface,
                                    const std::map<std::string, double>& speeds, const std::string& requested);

// H2_DICOMM_NIC_GBPS ("fast0=100,slow0=1"): speeds for NICs whose drivers report none or a wrong
// one (virtual NICs, shaped links). Throws CommError(usage) naming the variable and the entry.
std::map<std::string, double> parse_nic_speeds(const std::string& text);

}  // namespace h2::dicomm::detail
