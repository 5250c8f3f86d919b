// One libfabric reliable-datagram endpoint with tagged messages: the wire under DiComm.
//
// Not thread-safe: the endpoint is opened with FI_THREAD_DOMAIN, so the Engine serialises every
// call. Providers on this machine need manual progress (tcp;ofi_rxm and shm move nothing unless the
// completion queue is read), which is why poll() is the only way completions are found.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "routes.hpp"

namespace h2::dicomm::detail {

// What libfabric offers for RDM + tagged on this node, probed before the ranks choose their routes.
struct ProviderProbe {
  std::string libfabric_version;  // fi_version() as "1.17"
  // Every provider, fabric and domain libfabric offers, first occurrence order; the NIC's speed,
  // loopback and store facts are the caller's to fill (local_networks).
  std::vector<Network> networks;
};
ProviderProbe probe_providers();

struct Completion {
  void* context = nullptr;  // the context the operation was posted with
  int error = 0;            // 0, or a positive FI_E* / errno value
  std::string message;      // the provider's text when error != 0
  size_t bytes = 0;         // a receive's: the length of the message that landed
  // A receive's: the immediate data the sender sent with the message (FI_REMOTE_CQ_DATA), if any.
  std::optional<uint64_t> data;
};

// The size DiComm cuts a larger message into on `provider` (0: it never cuts). On ofi_rxm
// providers a message above rxm's SAR limit goes by rendezvous (RTS, a read, DONE), and a rank turns
// from receiving to sending only after the whole message: one 4 MiB message took 1.3x fi_pingpong's
// time over tcp;ofi_rxm under BBR, four 1 MiB messages in flight 0.75x (issue 7). A later A/B, 3
// interleaved runs of 200 ping-pongs: 4 MiB took 752-783 us whole, 703-722 us in 1 MiB parts and
// 616-629 us in 512 KiB parts; 16 MiB 3.1-3.3, 3.5-3.6 and 2.9-3.0 ms; 1 MiB 191-224 us whole and
// 203-210 us in two parts.
// shm copies a message in one cross-memory attach; cutting it gained nothing there.
size_t default_message_bytes(const std::string& provider);

class Fabric {
 public:
  // Opens fabric, domain, completion queue, address vector and endpoint on `network` (its
  // provider, fabric and domain). Throws h2::Error naming the network and the failing call.
  explicit Fabric(const Network& network);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const std::string& provider() const { return network_.provider; }
  const Network& network() const { return network_; }
  // The name of the shared-memory region behind the endpoint (the shm provider), "" for others.
  // Peers open it by name when they insert this endpoint's address, and never after; so once every
  // rank has inserted every address the name can go (unlink_region_name), and a rank killed later
  // leaves nothing in /dev/shm.
  const std::string& region_name() const { return region_name_; }
  static void unlink_region_name(const std::string& name);
  // The endpoint's address, to publish through the store.
  std::vector<uint8_t> address() const;
  // Inserts rank `rank`'s address; returns its fi_addr_t.
  fi_addr_t insert(int rank, const std::vector<uint8_t>& address);
  // Whether buffers must be registered (FI_MR_LOCAL); descriptors come from register_memory.
  bool needs_registration() const { return mr_local_; }
  // Registers [data, data+bytes) and returns its descriptor; the registration lives until
  // deregister(). Unique keys always (libfabric #10882).
  void* register_memory(void* data, size_t bytes, void** handle);
  void deregister(void* handle);

  // How many bits of immediate data a send can carry to its receiver's completion, which the Engine
  // labels messages with: 64 where the domain's cq_data_size is 8 (tcp;ofi_rxm, shm, efa), 32 where
  // it is 4 (verbs;ofi_rxm: an InfiniBand immediate), 0 below.
  unsigned label_bits() const { return cq_data_size_ >= 8 ? 64 : cq_data_size_ >= 4 ? 32 : 0; }

  // Post a tagged send / receive. Return 0, -FI_EAGAIN (progress, then retry) or another negative
  // error. `context` must point to a struct fi_context2 that lives until its completion. A send
  // with `label` carries it as immediate data (at most label_bits()); a receive matches its tag
  // exactly (no ignore mask: libfabric 1.17's shm matches messages that arrived before their
  // receive with a stale mask, smr_match_tagged on its unexpected queue).
  ssize_t post_send(const void* data, size_t bytes, void* desc, fi_addr_t peer, uint64_t tag,
                    std::optional<uint64_t> label, void* context);
  ssize_t post_recv(void* data, size_t bytes, void* desc, uint64_t tag, void* context);
  // Cancels a posted receive; its completion arrives with FI_ECANCELED.
  void cancel(void* context);
  // Reads up to `max` completions (successful and failed). Returns how many were found.
  size_t poll(std::vector<Completion>& out, size_t max = 64);
  // "fi_tsend: Resource temporarily unavailable" etc.
  static std::string error_text(ssize_t code);

 private:
  void name_shm_region();
  Network network_;
  std::string region_name_;
  bool mr_local_ = false;
  size_t cq_data_size_ = 0;
  uint64_t next_key_ = 1;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
};

}  // namespace h2::dicomm::detail
