#include "world_meeting.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/hex.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

namespace {

using json = nlohmann::json;

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text.empty() ? "none" : text;
}

// Every rank must use the same libfabric (different majors do not talk to each other) and ask for
// the same provider; where one is asked for, every rank must have it.
void check_fabric_alike(const std::vector<json>& ranks, bool shm_safe, const std::string& shm_hazard) {
  const std::string version = ranks[0]["libfabric"];
  for (size_t r = 1; r < ranks.size(); ++r)
    if (ranks[r]["libfabric"] != version)
      throw CommError(CommErrorKind::usage, static_cast<int>(r),
                      "DiComm: rank " + std::to_string(r) + " has libfabric " +
                          ranks[r]["libfabric"].get<std::string>() + " but rank 0 has " + version +
                          "; every rank of a job needs the same libfabric");
  const std::string requested = ranks[0]["requested"];
  for (size_t r = 1; r < ranks.size(); ++r)
    if (ranks[r]["requested"] != requested)
      throw CommError(CommErrorKind::usage, static_cast<int>(r),
                      "DiComm: rank " + std::to_string(r) + " asks for provider '" +
                          ranks[r]["requested"].get<std::string>() + "' but rank 0 for '" + requested +
                          "' (H2_FABRIC_PROVIDER must be the same on every rank)");
  if (requested == "shm" && !shm_safe)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: H2_FABRIC_PROVIDER=shm refused: " + shm_hazard + "; use tcp;ofi_rxm or a newer libfabric");
  if (requested.empty()) return;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<std::string> providers;
    for (const json& network : ranks[r]["networks"])
      if (std::find(providers.begin(), providers.end(), network["provider"]) == providers.end())
        providers.push_back(network["provider"]);
    if (std::find(providers.begin(), providers.end(), requested) == providers.end())
      throw CommError(CommErrorKind::usage, static_cast<int>(r),
                      "DiComm: rank " + std::to_string(r) + " (" + ranks[r]["node"].get<std::string>() +
                          ") has no libfabric provider '" + requested + "' (it has: " + join(providers) + ")");
  }
}

// Sets up the node transport between ranks of one node (node_transport.hpp): every rank maps the
// segments of the other ranks of its node and checks that it may read their memory; a pair uses
// it when both may. Collective over the world (nothing to do when no node has two ranks).
NodeSetup connect_node_transport(Store& store, int rank, const std::vector<json>& ranks) {
  std::map<std::string, std::vector<int>> nodes;
  for (size_t r = 0; r < ranks.size(); ++r) nodes[ranks[r]["node"].get<std::string>()].push_back(static_cast<int>(r));
  NodeSetup setup;
  if (std::all_of(nodes.begin(), nodes.end(), [](const auto& node) { return node.second.size() < 2; })) return setup;
  const std::vector<int>& local = nodes[ranks[static_cast<size_t>(rank)]["node"].get<std::string>()];
  const std::string prefix = "dicomm/node/";
  auto readable_key = [&](int r) { return prefix + "readable/" + std::to_string(r); };
  if (local.size() > 1) {
    std::string address;
    try {
      setup.transport = std::make_unique<NodeTransport>(rank, local);
      address = setup.transport->address();
    } catch (const std::exception& e) {
      log(LogLevel::warning, "dicomm", std::string("no node transport, libfabric carries everything: ") + e.what());
    }
    store.set(prefix + "address/" + std::to_string(rank), address);
    std::string readable = " ";
    bool reads_all = true;
    for (int peer : local) {
      if (peer == rank) continue;
      const std::string peer_address = store.get(prefix + "address/" + std::to_string(peer));
      std::string why = "rank " + std::to_string(peer) + " has no node transport";
      if (setup.transport && !peer_address.empty() && setup.transport->connect(peer, peer_address, why)) {
        readable += std::to_string(peer) + " ";
      } else {
        reads_all = false;
        log(LogLevel::warning, "dicomm",
            "libfabric carries the messages with rank " + std::to_string(peer) + ": " + why);
      }
    }
    store.set(readable_key(rank), readable);
    if (!reads_all) store.add(prefix + "unreadable", 1);
  }
  store.barrier("dicomm/node");  // every segment is mapped and every verdict in by now
  setup.memory_readable = store.add(prefix + "unreadable", 0) == 0;
  if (!setup.transport) return setup;
  setup.transport->unlink();
  const std::string mine = store.get(readable_key(rank));
  auto lists = [](const std::string& list, int r) {
    return list.find(" " + std::to_string(r) + " ") != std::string::npos;
  };
  for (int peer : local)
    if (peer != rank && lists(mine, peer) && lists(store.get(readable_key(peer)), rank)) setup.transport->enable(peer);
  return setup;
}

// libfabric's shm provider copies with cross-memory attach when it may and otherwise through
// shared bounce buffers (SAR); before libfabric 1.19 SAR hangs once several messages arrive before
// their receives are posted (ofiwg/libfabric#9143), which DiComm's pipelined transfers do all the
// time. So shm is only chosen where it will use cross-memory attach.
bool shm_cma_disabled_here() {
  const char* disabled = std::getenv("FI_SHM_DISABLE_CMA");
  std::string value = disabled != nullptr ? disabled : "";
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value == "1" || value == "on" || value == "true" || value == "yes";
}

// `cma_disabled`: FI_SHM_DISABLE_CMA is set on some rank (each publishes its own, so that every
// rank decides alike and no pair disagrees on shm).
bool shm_is_safe(const std::string& libfabric_version, bool memory_readable, bool cma_disabled) {
  int major = 0, minor = 0;
  std::sscanf(libfabric_version.c_str(), "%d.%d", &major, &minor);
  if (major > 1 || (major == 1 && minor >= 19)) return true;
  return memory_readable && !cma_disabled;
}

}  // namespace

std::string interface_of(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char host[NI_MAXHOST];
    const socklen_t length =
        i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : static_cast<socklen_t>(sizeof(sockaddr_in6));
    if (getnameinfo(i->ifa_addr, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0 && address == host)
      name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

// Ranks on one node can use shared memory. A network namespace counts as a node of its own, so
// tests with namespaces see separate hosts.
std::string node_identity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::error_code error;
  const auto netns = std::filesystem::read_symlink("/proc/self/ns/net", error);
  return std::string(host) + "/" + (error ? "" : netns.string());
}

// The first round through the store: every rank says where it runs, which networks it has and
// what it asks for; the ranks of each node set up the node transport, and every rank chooses the
// network to each of its other peers (routes.hpp).
Meeting meet_ranks(Store* store, const RankInfo& info, const WorldSettings& settings, const ProviderProbe& probe,
                   const std::string& node, const std::string& store_interface) {
  Meeting meeting;
  meeting.networks = local_networks(probe.networks, store_interface, settings.nic_gbps, settings.provider);
  const json mine = {{"node", node},
                     {"island", settings.island},
                     {"networks", meeting.networks},
                     {"libfabric", probe.libfabric_version},
                     {"requested", settings.provider},
                     {"shm_cma_disabled", shm_cma_disabled_here()},
                     {"settings", settings.shared()}};
  std::vector<json> ranks;
  if (store == nullptr) {
    ranks.push_back(mine);
  } else {
    const std::string prefix = "dicomm/rank/";
    store->set(prefix + std::to_string(info.rank), mine.dump());
    std::vector<json> shared;
    for (int r = 0; r < info.world_size; ++r) {
      ranks.push_back(json::parse(store->get(prefix + std::to_string(r))));
      shared.push_back(ranks.back()["settings"]);
    }
    check_settings_alike(shared);
    meeting.node = connect_node_transport(*store, info.rank, ranks);
    if (!settings.want_node_transport) meeting.node.transport.reset();
  }
  const std::string version = probe.libfabric_version;
  const std::string shm_hazard =
      "libfabric " + version +
      "'s shm provider would copy through bounce buffers here (cross-memory attach is not permitted or "
      "FI_SHM_DISABLE_CMA is set), and before libfabric 1.19 that hangs once several messages arrive ahead of "
      "their receives (ofiwg/libfabric#9143)";
  const bool cma_disabled =
      std::any_of(ranks.begin(), ranks.end(), [](const json& rank) { return rank["shm_cma_disabled"] == true; });
  const RouteRules rules{settings.provider, shm_is_safe(version, meeting.node.memory_readable, cma_disabled)};
  check_fabric_alike(ranks, rules.shm_safe, shm_hazard);

  std::vector<RankNetworks> all;
  for (const json& rank : ranks)
    all.push_back({rank["node"], rank["networks"].get<std::vector<Network>>(), rank["island"]});
  std::vector<bool> skip(ranks.size(), false);
  for (size_t r = 0; r < ranks.size(); ++r)
    skip[r] = meeting.node.transport && meeting.node.transport->enabled(static_cast<int>(r));
  meeting.ranks = all;
  meeting.rules = rules;
  try {
    meeting.routes = choose_routes(all, info.rank, rules, skip);
  } catch (const CommError& e) {
    // The peers that wait for this rank's addresses learn why instead of timing out.
    if (store != nullptr) store->set("dicomm/address/" + std::to_string(info.rank), json{{"error", e.what()}}.dump());
    throw;
  }
  for (size_t r = 0; r < ranks.size() && meeting.own < 0; ++r) meeting.own = meeting.routes[r];
  if (meeting.own < 0) {
    const RankNetworks& mine = all[static_cast<size_t>(info.rank)];
    meeting.own = choose_route(mine, mine, rules).first;
  }
  if (meeting.own < 0)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: libfabric offers no usable provider here" +
                        (settings.provider.empty() ? std::string() : " of '" + settings.provider + "'") +
                        " (see fi_info -l)");
  const bool offers_shm = std::any_of(meeting.networks.begin(), meeting.networks.end(),
                                      [](const Network& n) { return n.provider == "shm"; });
  if (!rules.shm_safe && offers_shm && settings.provider.empty())
    log(LogLevel::warning, "dicomm", "not choosing shm: " + shm_hazard);
  return meeting;
}

// Opens an endpoint on every network in `meeting`'s routes, each cutting messages at the size
// H2_DICOMM_FABRIC_MESSAGE_BYTES says (where unset, its provider's default).
Wires open_wires(const Meeting& meeting, const WorldSettings& settings) {
  Wires opened;
  std::vector<int> used{meeting.own};
  for (int network : meeting.routes)
    if (network >= 0 && std::find(used.begin(), used.end(), network) == used.end()) used.push_back(network);
  for (int network : used) {
    Wire wire;
    wire.fabric = std::make_unique<Fabric>(meeting.networks[static_cast<size_t>(network)]);
    wire.label_bits = wire.fabric->label_bits();
    wire.message_bytes = settings.message_bytes >= 0 ? static_cast<size_t>(settings.message_bytes)
                         : wire.label_bits > 0       ? default_message_bytes(wire.fabric->provider())
                                                     : 0;
    opened.wires.push_back(std::move(wire));
    opened.network_of.push_back(network);
  }
  return opened;
}

// The second round: every rank publishes each of its endpoints' address and message size (the
// same at both ends of a link: where unset it is the provider's default, known only now), and
// inserts each peer's on the network that leads to it. Returns every rank's route.
std::vector<Route> exchange_addresses(Store* store, const RankInfo& info, Wires& opened, const Meeting& meeting,
                                      const WorldSettings& settings) {
  json addresses = json::object(), sizes = json::object();
  for (size_t w = 0; w < opened.wires.size(); ++w) {
    const std::string key = meeting.networks[static_cast<size_t>(opened.network_of[w])].key();
    addresses[key] = hex(opened.wires[w].fabric->address());
    sizes[key] = opened.wires[w].message_bytes;
  }
  if (store != nullptr)
    store->set("dicomm/address/" + std::to_string(info.rank),
               json{{"addresses", addresses}, {"fabric_message_bytes", sizes}}.dump());
  // Refused only once published, so that a rank that leaves it unset meets the difference at once
  // instead of waiting for this rank's entry until the timeout.
  for (const Wire& wire : opened.wires)
    if (settings.message_bytes > 0 && wire.label_bits == 0)
      throw CommError(CommErrorKind::usage, -1,
                      "DiComm: H2_DICOMM_FABRIC_MESSAGE_BYTES=" + std::to_string(settings.message_bytes) +
                          " refused: provider '" + wire.fabric->provider() +
                          "' cannot carry 4 bytes of immediate data with a message (its cq_data_size is smaller), "
                          "which DiComm needs to check the parts of a cut message; set it to 0");
  std::vector<Route> routes(static_cast<size_t>(info.world_size));
  Route& own = routes[static_cast<size_t>(info.rank)];
  own.wire = opened.wire_of(meeting.own);
  own.address = opened.wires[own.wire].fabric->insert(info.rank, opened.wires[own.wire].fabric->address());
  for (int r = 0; r < info.world_size; ++r) {
    const int network = meeting.routes[static_cast<size_t>(r)];
    if (network < 0) continue;
    const Network& chosen = meeting.networks[static_cast<size_t>(network)];
    Route& route = routes[static_cast<size_t>(r)];
    route.wire = opened.wire_of(network);
    if (store == nullptr) throw std::logic_error("DiComm: a route to another rank in a job without a store");
    const json entry = json::parse(store->get("dicomm/address/" + std::to_string(r)));
    if (entry.contains("error"))
      throw CommError(
          CommErrorKind::usage, r,
          "DiComm: rank " + std::to_string(r) + " could not choose its networks: " + entry["error"].get<std::string>());
    if (!entry.at("addresses").contains(chosen.key()))
      throw CommError(CommErrorKind::usage, r,
                      "DiComm: rank " + std::to_string(r) + " opened no endpoint on " + chosen.key() + ", which rank " +
                          std::to_string(info.rank) + " chose for the pair (do their DiComm settings differ?)");
    const size_t theirs = entry.at("fabric_message_bytes").at(chosen.key()).get<size_t>();
    const size_t mine = opened.wires[route.wire].message_bytes;
    if (theirs != mine)
      throw CommError(CommErrorKind::usage, r,
                      "DiComm: H2_DICOMM_FABRIC_MESSAGE_BYTES is " + std::to_string(theirs) + " on rank " +
                          std::to_string(r) + " and " + std::to_string(mine) + " on rank " + std::to_string(info.rank) +
                          " (where unset, provider '" + chosen.provider + "''s default); set it alike");
    route.address =
        opened.wires[route.wire].fabric->insert(r, unhex(entry.at("addresses").at(chosen.key()).get<std::string>()));
  }
  return routes;
}

}  // namespace h2::dicomm::detail
