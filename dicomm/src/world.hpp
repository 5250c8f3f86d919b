// The process's membership of the job: the rendezvous store, the fabric endpoints (one per network
// its routes use) every communicator shares, the progress engine, and one Link per device in use.
// Created once by Communicator::world(); communicators hold it, so it lives as long as any of them.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/store.hpp"
#include "h2/plugin_comm.hpp"
#include "transport/engine.hpp"
#include "transport/link.hpp"
#include "transport/routes.hpp"

namespace h2::dicomm::detail {

enum class TagKind : uint64_t { collective = 1, p2p = 2 };
// 64-bit tag: kind (2 bits) | communicator id (14) | sender's world rank (16) | sequence (32).
// The sender's rank in the tag lets receives match any source (no FI_DIRECTED_RECV needed).
uint64_t make_tag(TagKind kind, uint32_t comm_id, int sender, uint32_t sequence);
constexpr int kMaxWorldSize = 1 << 16;
constexpr uint32_t kMaxCommunicators = 1u << 14;

class Transfer;
struct VendorPath;
struct IslandPath;

class World {
 public:
  static std::shared_ptr<World> create(const CommOptions& options);
  ~World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  Engine& engine() { return *engine_; }
  Store* store() { return store_.get(); }  // nullptr in a job of one rank
  size_t piece_bytes() const { return piece_bytes_; }
  size_t small_bytes() const { return small_bytes_; }
  // Whether a large allreduce over `ranks` runs by recursive halving and doubling rather than a ring.
  bool halving_doubling(int ranks) const;
  // H2_DICOMM_ALLREDUCE: auto, ring, halving_doubling or hierarchical.
  const std::string& allreduce_setting() const { return allreduce_; }
  // The link between world ranks a and b, in Gbit/s (routes.hpp's link_gbps): what islands group by.
  double link_gbps(int a, int b);
  // The Link of `device`, created on first use. Call with the engine's lock held or before any
  // task runs on that device (Link is not thread-safe; the engine serialises tasks).
  Link& link(const Device& device);
  // A new communicator id, unique in the job (the store counts them).
  uint32_t new_comm_id();
  // Makes `next`, a send to (or receive from) world rank `peer` with wire tag `tag`, follow
  // (Transfer::follow) the last one started with the same three, and become the last. Under one
  // lock: a thread that starts the next message with that tag finds `next` following already.
  void chain_point_to_point(bool send, int peer, uint64_t tag, const std::shared_ptr<Transfer>& next);

  // This rank's node, as DiComm tells nodes apart (host name and network namespace).
  const std::string& node() const { return node_; }
  // Whether communicators may run their collectives on their plugin's own library
  // (H2_DICOMM_VENDOR_COLLECTIVES: auto, or off).
  bool vendor_collectives() const { return vendor_collectives_; }
  // A plugin library's communicator, aborted with the job when any rank fails or aborts.
  void remember_vendor_comm(const std::shared_ptr<PluginComm>& comm);
  void abort_vendor_comms(const std::string& reason);

  // The region of device memory that node peer `peer` exported as `handle`, at a host address here,
  // opened once with one of this process's devices and then cached; empty when none can open it
  // (the node transport copies with process_vm_readv then). Called by the node transport.
  std::span<const char> open_shared(int peer, const H2_MemHandle& handle);

 private:
  World() = default;
  // Failures the store reports fail the engine and abort the plugin libraries' communicators; a
  // wait that times out asks the store which rank is missing.
  void watch_failures(std::chrono::milliseconds timeout);
  int rank_ = 0;
  int size_ = 1;
  size_t piece_bytes_ = 0;
  size_t small_bytes_ = 0;
  uint32_t next_local_id_ = 1;
  bool force_staging_ = false;
  bool vendor_collectives_ = false;
  std::string node_;
  std::mutex vendor_mutex_;
  std::vector<std::weak_ptr<PluginComm>> vendor_comms_;
  std::string allreduce_;  // H2_DICOMM_ALLREDUCE: auto, ring, halving_doubling or hierarchical
  // Every rank's networks as the ranks met, by class: ranks of one node that published the same.
  std::vector<RankNetworks> class_networks_;
  std::vector<int> network_class_;  // per world rank
  RouteRules route_rules_;
  std::mutex class_links_mutex_;
  std::map<std::pair<int, int>, double> class_links_;  // link_gbps between two classes, found once
  std::unique_ptr<Store> store_;
  std::unique_ptr<Engine> engine_;
  std::mutex links_mutex_;
  // One per device this process has sent from or received into: a device or two, so a scan by
  // Device (a pointer and an index compared) beats a map keyed by label (a string built per message).
  std::vector<std::unique_ptr<Link>> links_;
  bool share_device_memory_ = true;            // H2_DICOMM_SHARED_MEMORY
  static constexpr size_t kMaxImports = 1024;  // regions; cpu-reference exports one per device
  std::mutex imports_mutex_;
  std::map<std::string, std::shared_ptr<DeviceBuffer>> imports_;  // by handle and peer; null: cannot open
  std::mutex p2p_mutex_;
  std::map<std::tuple<bool, int, uint64_t>, std::weak_ptr<Transfer>> last_p2p_;
  static constexpr size_t kMaxRememberedTags = 1024;  // then the entries of transfers gone are dropped
  // How long a World closed by an exception in flight waits for the others at the last barrier.
  static constexpr std::chrono::milliseconds kUnwindingGrace{5000};
};

// What a communicator is: its members (world ranks, in communicator order) and its sequence numbers.
struct CommState {
  std::shared_ptr<World> world;
  uint32_t id = 0;
  std::string name;
  std::vector<int> members;  // world rank of each communicator rank
  int rank = 0;              // this process's rank in the communicator
  uint32_t sequence = 0;     // collectives issued so far (every member issues the same ones)
  uint32_t splits = 0;
  std::shared_ptr<VendorPath> vendor;   // decided at the first collective (vendor_path.hpp)
  std::shared_ptr<IslandPath> islands;  // decided at the first large collective (island_path.hpp)
  // Temporaries of hierarchical calls that failed, which queued work may still use (hierarchy.cpp).
  std::vector<Tensor> kept_after_failure;
};

}  // namespace h2::dicomm::detail
