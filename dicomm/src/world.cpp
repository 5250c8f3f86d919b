#include "world.hpp"

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

#include "h2/log.hpp"
#include "hex.hpp"
#include "missing_ranks.hpp"
#include "routes.hpp"
#include "world_settings.hpp"

namespace h2::dicomm::detail {

namespace {

using json = nlohmann::json;

// The interface that carries `address` (the one this rank reaches the store through), so socket
// providers use the same network as the rendezvous: lo for a local job, the test host's veth in a
// network namespace, the cluster NIC on a real job.
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

// What the ranks of each node can do with each other's memory.
struct NodeSetup {
  // Enabled for the pairs of this node that may read each other's memory; null when this rank has
  // no such peer.
  std::unique_ptr<NodeTransport> transport;
  // Every pair of ranks that share a node may read each other's memory (cross-memory attach).
  bool memory_readable = true;
};

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
bool shm_is_safe(const std::string& libfabric_version, bool memory_readable) {
  int major = 0, minor = 0;
  std::sscanf(libfabric_version.c_str(), "%d.%d", &major, &minor);
  if (major > 1 || (major == 1 && minor >= 19)) return true;
  const char* disabled = std::getenv("FI_SHM_DISABLE_CMA");
  std::string value = disabled != nullptr ? disabled : "";
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool cma_disabled = value == "1" || value == "on" || value == "true" || value == "yes";
  return memory_readable && !cma_disabled;
}

}  // namespace

uint64_t make_tag(TagKind kind, uint32_t comm_id, int sender, uint32_t sequence) {
  return (static_cast<uint64_t>(kind) << 62) | (static_cast<uint64_t>(comm_id & (kMaxCommunicators - 1)) << 48) |
         (static_cast<uint64_t>(sender & (kMaxWorldSize - 1)) << 32) | sequence;
}

namespace {

// What the ranks agreed when they met: each peer's network, and the node transport where ranks share a node.
struct Meeting {
  std::vector<Network> networks;  // this rank's
  std::vector<int> routes;        // per rank, an index into `networks`; -1: itself, or the node transport's
  int own = -1;                   // the network this rank's messages to itself go on
  NodeSetup node;
};

// The first round through the store: every rank says where it runs, which networks it has and
// what it asks for; the ranks of each node set up the node transport, and every rank chooses the
// network to each of its other peers (routes.hpp).
Meeting meet_ranks(Store* store, const RankInfo& info, const WorldSettings& settings, const ProviderProbe& probe,
                   const std::string& node, const std::string& store_interface) {
  Meeting meeting;
  meeting.networks = local_networks(probe.networks, store_interface, settings.nic_gbps);
  std::vector<json> ranks;
  if (store == nullptr) {
    ranks.push_back(json{{"node", node},
                         {"networks", meeting.networks},
                         {"libfabric", probe.libfabric_version},
                         {"requested", settings.provider}});
  } else {
    const std::string prefix = "dicomm/rank/";
    store->set(prefix + std::to_string(info.rank), json{{"node", node},
                                                        {"networks", meeting.networks},
                                                        {"libfabric", probe.libfabric_version},
                                                        {"requested", settings.provider},
                                                        {"settings", settings.shared()}}
                                                       .dump());
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
  const RouteRules rules{settings.provider, shm_is_safe(version, meeting.node.memory_readable)};
  check_fabric_alike(ranks, rules.shm_safe, shm_hazard);

  std::vector<RankNetworks> all;
  for (const json& rank : ranks) all.push_back({rank["node"], rank["networks"].get<std::vector<Network>>()});
  std::vector<bool> skip(ranks.size(), false);
  for (size_t r = 0; r < ranks.size(); ++r)
    skip[r] = meeting.node.transport && meeting.node.transport->enabled(static_cast<int>(r));
  meeting.routes = choose_routes(all, info.rank, rules, skip);
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

// The endpoints this rank opened: one per network it uses (Meeting::routes, and `own`).
struct Wires {
  std::vector<Wire> wires;
  std::vector<int> network_of;  // per wire, an index into Meeting::networks
  size_t wire_of(int network) const {
    return static_cast<size_t>(std::find(network_of.begin(), network_of.end(), network) - network_of.begin());
  }
};

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
    const json entry = json::parse(store->get("dicomm/address/" + std::to_string(r)));
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

}  // namespace

std::shared_ptr<World> World::create(const CommOptions& options) {
  const RankInfo info = rank_info_from_environment();
  if (info.world_size > kMaxWorldSize)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: a job of " + std::to_string(info.world_size) + " ranks is larger than the " +
                        std::to_string(kMaxWorldSize) + " DiComm supports");
  const WorldSettings settings = read_world_settings(options);
  std::shared_ptr<World> world(new World());
  world->rank_ = info.rank;
  world->size_ = info.world_size;
  world->piece_bytes_ = settings.piece_bytes;
  world->small_bytes_ = settings.small_bytes;
  world->force_staging_ = settings.force_staging;
  world->allreduce_ = settings.allreduce;
  world->share_device_memory_ = settings.share_device_memory;
  world->vendor_collectives_ = settings.vendor_collectives;
  world->node_ = node_identity();

  // The interface this rank reaches the store through (lo for a local job, a test host's veth, the
  // cluster NIC): between networks otherwise alike, the ranks prefer the one both reach it through.
  std::string store_interface = info.world_size > 1 ? "" : "lo";
  if (info.world_size > 1) {
    world->store_ = Store::connect(info, settings.timeout);
    store_interface = interface_of(world->store_->local_address());
  }
  const ProviderProbe probe = probe_providers();
  Meeting meeting = meet_ranks(world->store_.get(), info, settings, probe, world->node_, store_interface);
  Wires opened = open_wires(meeting, settings);
  std::vector<Route> routes = exchange_addresses(world->store_.get(), info, opened, meeting, settings);
  std::vector<std::string> region_names;
  for (const Wire& wire : opened.wires) region_names.push_back(wire.fabric->region_name());
  if (meeting.node.transport && world->share_device_memory_) {
    World* self = world.get();
    meeting.node.transport->set_shared_memory_opener(
        [self](int peer, const H2_MemHandle& handle) { return self->open_shared(peer, handle); });
  }
  world->engine_ = std::make_unique<Engine>(std::move(opened.wires), std::move(routes),
                                            std::move(meeting.node.transport), info.rank, settings.timeout);
  if (world->store_) {
    world->watch_failures(settings.timeout);
    world->store_->barrier("dicomm/world");
  }
  for (const std::string& name : region_names) Fabric::unlink_region_name(name);  // every address is inserted by now
  log(LogLevel::info, "dicomm",
      info.describe() + ": " + world->engine_->transports() + ", libfabric " + probe.libfabric_version);
  return world;
}

void World::watch_failures(std::chrono::milliseconds timeout) {
  Engine* engine = engine_.get();
  store_->on_failure([engine, this](const RankFailure& failure) {
    const std::string message = "DiComm: rank " + std::to_string(failure.rank) + " failed: " + failure.reason;
    engine->fail(CommErrorKind::peer_failed, failure.rank, message);
    abort_vendor_comms(message);
  });
  // Pings say whether this rank waits for its peers; a wait that times out asks which rank does not.
  store_->report_wait_state([engine] {
    const auto [waiting, since] = engine->wait_state();
    return WaitState{waiting, since};
  });
  Store* store = store_.get();
  engine->set_timeout_diagnosis(
      [store, rank = rank_, timeout] { return detail::missing_ranks(store->activity(), rank, timeout); });
}

World::~World() {
  // No rank may close its endpoint while another still needs data from it (the last pieces of a
  // rendezvous send), so healthy ranks meet once more before closing.
  if (store_ && engine_ && !engine_->failed()) {
    try {
      store_->barrier("dicomm/finalize");
    } catch (const std::exception& e) {
      log(LogLevel::warning, "dicomm", std::string("closing: ") + e.what());
    }
  }
  // The store's failure handler points at the engine: no failure reported from here on (the store's
  // threads run until close() below) may reach it.
  if (store_) {
    store_->on_failure({});
    store_->report_wait_state({});
  }
  // The engine first: its background thread may still be delivering a message, which reads through
  // imports_ and looks through links_.
  engine_.reset();
  imports_.clear();
  links_.clear();
  if (store_) {
    try {
      store_->close();
    } catch (const std::exception& e) {
      log(LogLevel::warning, "dicomm", std::string("closing the store: ") + e.what());
    }
  }
}

bool World::halving_doubling(int ranks) const {
  const bool power_of_two = ranks > 1 && (ranks & (ranks - 1)) == 0;
  if (allreduce_ == "ring" || !power_of_two) return false;
  return allreduce_ == "halving_doubling" || ranks > 2;  // at 2 ranks both are the same exchange
}

Link& World::link(const Device& device) {
  std::lock_guard lock(links_mutex_);
  for (const auto& link : links_)
    if (link->device() == device) return *link;
  return *links_.emplace_back(std::make_unique<Link>(device, piece_bytes_, force_staging_, share_device_memory_));
}

std::shared_ptr<Transfer> World::point_to_point_predecessor(bool send, int peer, uint64_t tag,
                                                            const std::shared_ptr<Transfer>& next) {
  std::lock_guard lock(p2p_mutex_);
  std::weak_ptr<Transfer>& last = last_p2p_[{send, peer, tag}];
  std::shared_ptr<Transfer> previous = last.lock();
  last = next;
  // A job may use a tag per micro-batch: forget the transfers that are gone.
  if (last_p2p_.size() > kMaxRememberedTags)
    std::erase_if(last_p2p_, [](const auto& entry) { return entry.second.expired(); });
  return previous;
}

std::span<const char> World::open_shared(int peer, const H2_MemHandle& handle) {
  std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof handle.bytes);
  key += "@" + std::to_string(peer);
  std::lock_guard imports_lock(imports_mutex_);
  auto view = [](const std::shared_ptr<DeviceBuffer>& buffer) {
    return buffer ? std::span<const char>(static_cast<const char*>(buffer->data()), buffer->size())
                  : std::span<const char>();
  };
  if (auto it = imports_.find(key); it != imports_.end()) return view(it->second);
  // A device of this process that can open it: one of the sender's plugin (another plugin refuses
  // the handle), whose pointers are host addresses (the node transport copies with memcpy).
  std::shared_ptr<DeviceBuffer> opened;
  {
    std::lock_guard links_lock(links_mutex_);
    for (const auto& link : links_) {
      const Device& device = link->device();
      if (!device.can_share_memory() || !device.properties().host_accessible) continue;
      try {
        opened = std::make_shared<DeviceBuffer>(device.import_memory(handle));
        break;
      } catch (const Error& e) {
        log(LogLevel::debug, "dicomm",
            "rank " + std::to_string(peer) + "'s device memory is copied, not mapped: " + e.what());
      }
    }
  }
  // Imports are kept: a handle names a region (cpu-reference: a peer's whole arena), and a job sends
  // from the same few regions over and over. Closing one waits for every stream of its device, so
  // that happens only when very many have piled up (a plugin exporting each allocation apart).
  if (imports_.size() >= kMaxImports) imports_.clear();
  imports_.emplace(std::move(key), opened);
  return view(opened);
}

void World::remember_vendor_comm(const std::shared_ptr<PluginComm>& comm) {
  std::lock_guard lock(vendor_mutex_);
  std::erase_if(vendor_comms_, [](const auto& c) { return c.expired(); });
  vendor_comms_.push_back(comm);
}

void World::abort_vendor_comms(const std::string& reason) {
  std::lock_guard lock(vendor_mutex_);
  for (const auto& weak : vendor_comms_)
    if (const auto comm = weak.lock()) comm->abort(reason);
}

uint32_t World::new_comm_id() {
  const int64_t id = store_ ? store_->add("dicomm/next_comm_id", 1) : next_local_id_++;
  if (id >= static_cast<int64_t>(kMaxCommunicators))
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: the job has created " + std::to_string(kMaxCommunicators - 1) +
                        " communicators, the most its message tags can tell apart");
  return static_cast<uint32_t>(id);
}

}  // namespace h2::dicomm::detail
