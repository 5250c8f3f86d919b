// How the ranks meet when the World is created, through the rendezvous store: each says where it
// runs, which networks it has (routes.hpp) and which shared settings; the ranks of each node set up
// the node transport; each rank chooses its network to every other, opens an endpoint per network
// it uses and inserts its peers' addresses there. What comes out wires the Engine.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "h2/dicomm/bootstrap.hpp"
#include "h2/dicomm/store.hpp"
#include "transport/engine.hpp"
#include "transport/routes.hpp"
#include "world_settings.hpp"

namespace h2::dicomm::detail {

// What the ranks of each node can do with each other's memory.
struct NodeSetup {
  // Enabled for the pairs of this node that may read each other's memory; null when this rank has
  // no such peer.
  std::unique_ptr<NodeTransport> transport;
  // Every pair of ranks that share a node may read each other's memory (cross-memory attach).
  bool memory_readable = true;
};

// What the ranks agreed when they met: each peer's network, and the node transport where ranks share a node.
struct Meeting {
  std::vector<Network> networks;  // this rank's
  std::vector<int> routes;        // per rank, an index into `networks`; -1: itself, or the node transport's
  int own = -1;                   // the network this rank's messages to itself go on
  NodeSetup node;
  std::vector<RankNetworks> ranks;  // every rank's, to group ranks into islands (islands.hpp)
  RouteRules rules;
};

// The endpoints this rank opened: one per network it uses (Meeting::routes, and `own`).
struct Wires {
  std::vector<Wire> wires;
  std::vector<int> network_of;  // per wire, an index into Meeting::networks
  size_t wire_of(int network) const {
    return static_cast<size_t>(std::find(network_of.begin(), network_of.end(), network) - network_of.begin());
  }
};

// The interface that carries `address` (the one this rank reaches the store through): between
// networks otherwise alike, the ranks prefer the one both reach the store through.
std::string interface_of(const std::string& address);

// Ranks on one node can use shared memory. A network namespace counts as a node of its own, so
// tests with namespaces see separate hosts.
std::string node_identity();

// The first round through the store: every rank says where it runs, which networks it has and
// what it asks for; the ranks of each node set up the node transport, and every rank chooses the
// network to each of its other peers (routes.hpp).
Meeting meet_ranks(Store* store, const RankInfo& info, const WorldSettings& settings, const ProviderProbe& probe,
                   const std::string& node, const std::string& store_interface);

// Opens an endpoint on every network in `meeting`'s routes, each cutting messages at the size
// H2_DICOMM_FABRIC_MESSAGE_BYTES says (where unset, its provider's default).
Wires open_wires(const Meeting& meeting, const WorldSettings& settings);

// The second round: every rank publishes each of its endpoints' address and message size (the
// same at both ends of a link: where unset it is the provider's default, known only now), and
// inserts each peer's on the network that leads to it. Returns every rank's route.
std::vector<Route> exchange_addresses(Store* store, const RankInfo& info, Wires& opened, const Meeting& meeting,
                                      const WorldSettings& settings);

}  // namespace h2::dicomm::detail
