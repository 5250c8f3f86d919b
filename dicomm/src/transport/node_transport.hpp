// DiComm's transport between ranks on one node: commands through POSIX shared memory, and the data
// copied by the receiver straight out of the sender's memory with process_vm_readv (cross-memory
// attach), as Open MPI's vader and UCX's cma transport do. libfabric's shm provider moves data the
// same way, but in libfabric 1.17 it holds a lock on the receiving endpoint's shared region for the
// whole copy (smr_progress_cmd), which the sending side needs too; two ranks sending to each other
// took turns, and a ring allreduce ran at half the speed of Open MPI's. Here both copy at once.
//
// A pair of ranks uses it when both can read each other's memory (checked at start-up: ptrace
// rules, containers without CAP_SYS_PTRACE); libfabric carries everything else. Matching follows
// libfabric's tagged messages: a receive takes the first message from its peer with its tag, in
// the order sent, whether the message arrived before or after the receive was posted.
//
// Where the sender's data lies in device memory its plugin exports (Device::export_memory) and the
// receiver can open it, the receiver copies from a mapping of it instead (the opener, set by the
// World, imports and caches): no page pinning per message, and a plain memcpy, as Open MPI's
// XPMEM path and NCCL's CUDA IPC handles within a node do.
//
// Not thread-safe: the Engine serialises every call, as for the Fabric.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric.hpp"
#include "h2/device.hpp"

namespace h2::dicomm::detail {

class NodeTransport {
 public:
  // Creates this rank's shared segment for the world ranks `local` (this node's ranks, in rank
  // order, this one included). Throws h2::Error naming the call that failed.
  NodeTransport(int world_rank, std::vector<int> local);
  ~NodeTransport();
  NodeTransport(const NodeTransport&) = delete;
  NodeTransport& operator=(const NodeTransport&) = delete;

  // What a peer needs to reach this rank (published through the store).
  std::string address() const;
  // Maps a peer's segment from its address() and checks that this process may read the peer's
  // memory. Returns false, with the reason in `why`, when it may not.
  bool connect(int world_rank, const std::string& address, std::string& why);
  // Use the transport for `world_rank` (both sides could read each other's memory).
  void enable(int world_rank);
  bool enabled(int world_rank) const;
  // Removes this rank's segment name once every peer has mapped it: nothing is left behind in
  // /dev/shm however the job ends.
  void unlink();

  // The region a peer exported as `handle`, at a host address here; empty when it cannot be opened
  // here (the receiver then copies with process_vm_readv).
  using SharedMemoryOpener = std::function<std::span<const char>(int world_rank, const H2_MemHandle& handle)>;
  void set_shared_memory_opener(SharedMemoryOpener opener) { opener_ = std::move(opener); }
  bool maps_shared_memory() const { return static_cast<bool>(opener_); }

  // As Fabric::post_send and post_recv: 0 or -FI_EAGAIN (progress, then retry). `context` comes
  // back in the completion. `shared` (may be null; borrowed for the call) says where `data` lies in
  // exported device memory.
  ssize_t post_send(int peer, const void* data, size_t bytes, uint64_t tag, void* context,
                    const MemoryExport* shared = nullptr);
  ssize_t post_recv(int peer, void* data, size_t bytes, uint64_t tag, void* context);
  // Delivers arrived messages to posted receives (copying them) and reports completions.
  size_t poll(std::vector<Completion>& out);

  struct Segment;
  struct Peer;

 private:
  struct Arrived {
    uint64_t tag = 0, bytes = 0, address = 0, send_id = 0;
    std::vector<char> inline_data;
    bool is_inline = false;
    bool shared = false;  // the data may be read through a mapping of `handle`
    uint64_t shared_offset = 0;
    H2_MemHandle handle{};
  };
  struct Posted {
    void* data;
    size_t bytes;
    uint64_t tag;
    void* context;
  };
  Peer& peer(int world_rank);
  // Copies `message` into `recv`, completes it and acknowledges the sender.
  void deliver(Peer& from, const Arrived& message, const Posted& recv, std::vector<Completion>& out);
  void acknowledge(Peer& to, uint64_t send_id, int error);
  void flush_acknowledgements(Peer& to);

  int rank_;
  std::vector<int> local_;
  int index_ = -1;  // this rank's position in local_
  std::string name_;
  Segment* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  bool unlinked_ = false;
  std::vector<std::unique_ptr<Peer>> peers_;   // by position in local_
  std::unordered_map<uint64_t, void*> sends_;  // awaiting the receiver's acknowledgement
  uint64_t next_send_id_ = 1;
  std::vector<Completion> done_;  // completed when posted (small messages are copied into the command)
  SharedMemoryOpener opener_;
};

}  // namespace h2::dicomm::detail
