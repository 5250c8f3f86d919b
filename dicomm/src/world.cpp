#include "world.hpp"

#include <algorithm>
#include <exception>
#include <map>

#include "collectives/transfer.hpp"
#include "h2/log.hpp"
#include "store/missing_ranks.hpp"
#include "world_meeting.hpp"
#include "world_settings.hpp"

namespace h2::dicomm::detail {

uint64_t make_tag(TagKind kind, uint32_t comm_id, int sender, uint32_t sequence) {
  return (static_cast<uint64_t>(kind) << 62) | (static_cast<uint64_t>(comm_id & (kMaxCommunicators - 1)) << 48) |
         (static_cast<uint64_t>(sender & (kMaxWorldSize - 1)) << 32) | sequence;
}

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
  world->route_rules_ = meeting.rules;
  // Ranks that published the same networks from the same node link alike: the links between such
  // classes are found once each (a node's ranks usually share its NICs, so 1,024 ranks on 128 nodes
  // need 8 thousand route choices, not half a million).
  std::map<std::string, int> classes;
  for (const RankNetworks& rank : meeting.ranks) {
    std::string key = rank.node + '\n' + rank.island;
    for (const Network& n : rank.networks) key += '\n' + nlohmann::json(n).dump();
    const auto [found, added] = classes.emplace(key, static_cast<int>(world->class_networks_.size()));
    if (added) world->class_networks_.push_back(rank);
    world->network_class_.push_back(found->second);
  }
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
  // rendezvous send), so healthy ranks meet once more before closing. A rank whose program leaves
  // DiComm's scope through an exception may be the only one leaving: the others may be waiting for
  // it in a collective or for a key it was to set, and would wait out their timeout while it waited
  // for them here. It meets them for a few seconds only (a program whose ranks all throw, and catch
  // it further up, still closes cleanly), and then fails the job, so that every rank stops at once
  // and names it. (Only an exception in flight on this thread counts: a World released inside a
  // catch block, or by another thread, closes as a healthy one.)
  if (store_ && engine_ && !engine_->failed()) {
    const bool unwinding = std::uncaught_exceptions() > 0;
    try {
      if (unwinding)
        store_->barrier_within("dicomm/finalize", kUnwindingGrace);
      else
        store_->barrier("dicomm/finalize");
    } catch (const std::exception& e) {
      if (unwinding) {
        try {
          store_->abort("its program left DiComm through an exception (rank " + std::to_string(rank_) +
                        "'s output says which), and the others did not close within " +
                        std::to_string(kUnwindingGrace.count() / 1000) + " s");
        } catch (const std::exception& abort_error) {
          log(LogLevel::warning, "dicomm", std::string("closing: ") + abort_error.what());
        }
      } else {
        log(LogLevel::warning, "dicomm", std::string("closing: ") + e.what());
      }
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

double World::link_gbps(int a, int b) {
  if (static_cast<size_t>(std::max(a, b)) >= network_class_.size()) return 0;  // a job of one rank
  const int ca = network_class_[static_cast<size_t>(a)], cb = network_class_[static_cast<size_t>(b)];
  const std::pair<int, int> pair{std::min(ca, cb), std::max(ca, cb)};
  std::lock_guard lock(class_links_mutex_);
  const auto known = class_links_.find(pair);
  if (known != class_links_.end()) return known->second;
  const double gbps = detail::link_gbps(class_networks_[static_cast<size_t>(pair.first)],
                                        class_networks_[static_cast<size_t>(pair.second)], route_rules_);
  class_links_.emplace(pair, gbps);
  return gbps;
}

Link& World::link(const Device& device) {
  std::lock_guard lock(links_mutex_);
  for (const auto& link : links_)
    if (link->device() == device) return *link;
  return *links_.emplace_back(std::make_unique<Link>(device, piece_bytes_, force_staging_, share_device_memory_));
}

void World::chain_point_to_point(bool send, int peer, uint64_t tag, const std::shared_ptr<Transfer>& next) {
  std::lock_guard lock(p2p_mutex_);
  std::weak_ptr<Transfer>& last = last_p2p_[{send, peer, tag}];
  next->follow(last.lock());
  last = next;
  // A job may use a tag per micro-batch: forget the transfers that are gone.
  if (last_p2p_.size() > kMaxRememberedTags)
    std::erase_if(last_p2p_, [](const auto& entry) { return entry.second.expired(); });
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
