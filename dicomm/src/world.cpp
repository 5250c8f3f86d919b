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

// Every rank must use the same provider of the same libfabric: `net` and `tcp;ofi_rxm` do not talk
// to each other, nor do different libfabric majors.
std::string agree_on_provider(const std::vector<json>& ranks, bool shm_safe) {
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
  const std::string shm_hazard =
      "libfabric " + version +
      "'s shm provider would copy through bounce buffers here (cross-memory attach is not permitted or "
      "FI_SHM_DISABLE_CMA is set), and before libfabric 1.19 that hangs once several messages arrive ahead of "
      "their receives (ofiwg/libfabric#9143)";
  if (requested == "shm" && !shm_safe)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: H2_FABRIC_PROVIDER=shm refused: " + shm_hazard + "; use tcp;ofi_rxm or a newer libfabric");
  if (!requested.empty()) {
    for (size_t r = 0; r < ranks.size(); ++r) {
      const auto providers = ranks[r]["providers"].get<std::vector<std::string>>();
      if (std::find(providers.begin(), providers.end(), requested) == providers.end())
        throw CommError(CommErrorKind::usage, static_cast<int>(r),
                        "DiComm: rank " + std::to_string(r) + " (" + ranks[r]["node"].get<std::string>() +
                            ") has no libfabric provider '" + requested + "' (it has: " + join(providers) + ")");
    }
    return requested;
  }
  std::vector<std::string> common = ranks[0]["providers"];
  bool single_node = true;
  for (const json& rank : ranks) {
    const auto providers = rank["providers"].get<std::vector<std::string>>();
    std::erase_if(common, [&](const std::string& p) {
      return std::find(providers.begin(), providers.end(), p) == providers.end();
    });
    single_node = single_node && rank["node"] == ranks[0]["node"];
  }
  if (!shm_safe && std::erase(common, "shm") > 0) log(LogLevel::warning, "dicomm", "not choosing shm: " + shm_hazard);
  const std::string chosen = choose_provider(common, single_node);
  if (chosen.empty()) {
    std::string detail;
    for (size_t r = 0; r < ranks.size(); ++r)
      detail += "; rank " + std::to_string(r) + ": " + join(ranks[r]["providers"].get<std::vector<std::string>>());
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: the ranks share no usable libfabric provider" + detail +
                        " (set H2_FABRIC_PROVIDER to one they all have)");
  }
  return chosen;
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

// What the ranks agreed when they met: the provider, and the node transport where ranks share a node.
struct Meeting {
  std::string provider;
  NodeSetup node;
};

// The first round through the store: every rank says where it runs, which providers it has and
// what it asks for; the ranks of each node set up the node transport and all agree on a provider.
Meeting meet_ranks(Store* store, const RankInfo& info, const WorldSettings& settings, const ProviderProbe& probe,
                   const std::string& node) {
  Meeting meeting;
  if (store == nullptr) {
    meeting.provider = settings.provider.empty() ? choose_provider(probe.providers, true) : settings.provider;
    if (meeting.provider.empty())
      throw CommError(CommErrorKind::usage, -1, "DiComm: libfabric offers no usable provider here (see fi_info -l)");
    return meeting;
  }
  const std::string prefix = "dicomm/rank/";
  store->set(prefix + std::to_string(info.rank), json{{"node", node},
                                                      {"providers", probe.providers},
                                                      {"libfabric", probe.libfabric_version},
                                                      {"requested", settings.provider},
                                                      {"settings", settings.shared()}}
                                                     .dump());
  std::vector<json> ranks, shared;
  for (int r = 0; r < info.world_size; ++r) {
    ranks.push_back(json::parse(store->get(prefix + std::to_string(r))));
    shared.push_back(ranks.back()["settings"]);
  }
  check_settings_alike(shared);
  meeting.node = connect_node_transport(*store, info.rank, ranks);
  meeting.provider = agree_on_provider(ranks, shm_is_safe(probe.libfabric_version, meeting.node.memory_readable));
  return meeting;
}

// The second round: every rank's endpoint address and fabric message size (the same on every rank:
// where unset it is the agreed provider's default, known only now), inserted into the fabric.
std::vector<fi_addr_t> exchange_addresses(Store* store, const RankInfo& info, Fabric& fabric,
                                          const WorldSettings& settings, size_t message_bytes,
                                          const std::string& provider) {
  if (store != nullptr)
    store->set("dicomm/address/" + std::to_string(info.rank),
               json{{"address", hex(fabric.address())}, {"fabric_message_bytes", message_bytes}}.dump());
  // Refused only once published, so that a rank that leaves it unset meets the difference at once
  // instead of waiting for this rank's entry until the timeout.
  if (settings.message_bytes > 0 && fabric.label_bits() == 0)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: H2_DICOMM_FABRIC_MESSAGE_BYTES=" + std::to_string(settings.message_bytes) +
                        " refused: provider '" + provider +
                        "' cannot carry 4 bytes of immediate data with a message (its cq_data_size is smaller), "
                        "which DiComm needs to check the parts of a cut message; set it to 0");
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(info.world_size));
  if (store == nullptr) {
    addresses[0] = fabric.address();
    return fabric.insert(addresses);
  }
  for (int r = 0; r < info.world_size; ++r) {
    const json entry = json::parse(store->get("dicomm/address/" + std::to_string(r)));
    addresses[static_cast<size_t>(r)] = unhex(entry.at("address").get<std::string>());
    const size_t theirs = entry.at("fabric_message_bytes").get<size_t>();
    if (theirs != message_bytes)
      throw CommError(CommErrorKind::usage, r,
                      "DiComm: H2_DICOMM_FABRIC_MESSAGE_BYTES is " + std::to_string(theirs) + " on rank " +
                          std::to_string(r) + " and " + std::to_string(message_bytes) + " on rank " +
                          std::to_string(info.rank) + " (where unset, provider '" + provider +
                          "''s default); set it alike");
  }
  return fabric.insert(addresses);
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

  // Socket providers use the interface this rank reaches the store through (lo for a local job, a
  // test host's veth, the cluster NIC); they read it when libfabric first initialises them, and a
  // user's setting wins.
  std::string iface = "lo";
  if (info.world_size > 1) {
    world->store_ = Store::connect(info, settings.timeout);
    const std::string found = interface_of(world->store_->local_address());
    if (!found.empty()) iface = found;
  }
  for (const char* variable : {"FI_TCP_IFACE", "FI_NET_IFACE", "FI_SOCKETS_IFACE"}) setenv(variable, iface.c_str(), 0);
  const ProviderProbe probe = probe_providers(iface);

  Meeting meeting = meet_ranks(world->store_.get(), info, settings, probe, world->node_);
  auto fabric = std::make_unique<Fabric>(meeting.provider, is_socket_provider(meeting.provider) ? iface : "");
  const size_t message_bytes = settings.message_bytes >= 0 ? static_cast<size_t>(settings.message_bytes)
                               : fabric->label_bits() > 0  ? default_message_bytes(meeting.provider)
                                                           : 0;
  std::vector<fi_addr_t> peers =
      exchange_addresses(world->store_.get(), info, *fabric, settings, message_bytes, meeting.provider);
  const std::string region_name = fabric->region_name();
  if (!settings.want_node_transport) meeting.node.transport.reset();
  if (meeting.node.transport && world->share_device_memory_) {
    World* self = world.get();
    meeting.node.transport->set_shared_memory_opener(
        [self](int peer, const H2_MemHandle& handle) { return self->open_shared(peer, handle); });
  }
  world->engine_ = std::make_unique<Engine>(std::move(fabric), std::move(meeting.node.transport), std::move(peers),
                                            info.rank, settings.timeout, message_bytes);
  if (world->store_) {
    world->watch_failures(settings.timeout);
    world->store_->barrier("dicomm/world");
  }
  Fabric::unlink_region_name(region_name);  // every rank has inserted every address by now
  log(LogLevel::info, "dicomm",
      info.describe() + ": " + world->engine_->transports() +
          (is_socket_provider(meeting.provider) ? " on " + iface : "") + ", libfabric " + probe.libfabric_version);
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
