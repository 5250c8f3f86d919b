#include "collectives.hpp"

#include <sys/mman.h>

#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "collective_checks.hpp"
#include "common.hpp"
#include "handle_registry.hpp"
#include "memory_sharing.hpp"
#include "plugin_state.hpp"
#include "shm_collectives.hpp"

namespace h2::cpu_reference {
namespace {

using h2::plugin::ShmComm;

// Where a buffer lies for the node's other processes: its device's arena (a memfd, as mem_export
// names it) and the buffer's offset there.
struct PeerPlace {
  SharedRange arena;
  uint64_t offset = 0;
};
static_assert(sizeof(PeerPlace) <= ShmComm::kPlaceBytes && std::is_trivially_copyable_v<PeerPlace>);

ShmComm::Place place_of(const void* ptr) {
  ShmComm::Place place;
  DeviceMemory* memory = ptr != nullptr ? runtime().owner_of(ptr) : nullptr;
  if (memory == nullptr) return place;
  try {
    PeerPlace where;
    where.arena = memory->share(ptr, where.offset);
    std::memcpy(place.bytes, &where, sizeof where);
    place.known = true;
  } catch (const PluginError&) {
    // An import, or an arena that is not a memfd: the call goes through the segment.
  }
  return place;
}

// The other ranks' arenas this process has mapped, each once for the communicator's life.
class PeerArenas {
 public:
  PeerArenas() = default;
  PeerArenas(const PeerArenas&) = delete;
  PeerArenas& operator=(const PeerArenas&) = delete;
  ~PeerArenas() {
    for (const auto& [key, mapped] : mapped_)
      if (mapped.base != nullptr) munmap(mapped.base, mapped.mapped);
  }

  // A host pointer to `bytes` at `place`, or nullptr when this process cannot map its arena (which
  // it then never tries again).
  char* open(const ShmComm::Place& place, uint64_t bytes) {
    PeerPlace where;
    std::memcpy(&where, place.bytes, sizeof where);
    if (bytes > where.arena.bytes || where.offset > where.arena.bytes - bytes) return nullptr;
    const auto key = std::make_tuple(where.arena.pid, where.arena.inode, where.arena.filesystem);
    auto it = mapped_.find(key);
    if (it == mapped_.end()) {
      MappedRange mapped;
      try {
        mapped = map_shared_range(where.arena);
      } catch (const PluginError&) {
        // Through the segment, then: the library works wherever the node's processes may share a
        // segment, also where they may not open each other's memory.
      }
      it = mapped_.emplace(key, mapped).first;
    }
    return it->second.base != nullptr ? it->second.base + it->second.lead + where.offset : nullptr;
  }

 private:
  std::map<std::tuple<pid_t, uint64_t, uint64_t>, MappedRange> mapped_;
};

struct Comm {
  int device;
  ShmComm shm;  // its InPlace holds the peers' arenas it maps (PeerArenas), for its whole life
};

h2::plugin::HandleRegistry<H2_Comm, Comm>& comms() {
  static h2::plugin::HandleRegistry<H2_Comm, Comm> registry("communicator");
  return registry;
}

// The calls of this thread between group_start and group_end: collectives run in order, then each
// communicator's point-to-point transfers progress together, one communicator after another (a
// group whose transfers on two communicators must interleave would wait; nothing in H2 issues one).
struct Group {
  int depth = 0;
  H2_Stream* stream = nullptr;
  std::vector<std::function<void()>> collectives;
  std::map<std::shared_ptr<Comm>, std::vector<ShmComm::Transfer>> transfers;
};
thread_local Group group;

std::shared_ptr<Stream> stream_of(const Comm& comm, H2_Stream* handle) {
  auto stream = runtime().stream(handle);
  if (stream->device() != comm.device)
    fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to device " + std::to_string(stream->device()) +
                                         ", the communicator to device " + std::to_string(comm.device));
  return stream;
}

uint64_t bytes_of(uint64_t count, uint32_t dtype) {
  return count * h2::plugin::collective_element_size(dtype);
}

// Whether this thread is inside a group, which then takes the call (on the group's one stream).
bool joins_group(H2_Stream* handle) {
  return h2::plugin::joins_group(group.depth, group.stream, handle);
}

// Runs `work` on the stream, or keeps it for group_end inside a group.
void issue(const Comm& comm, H2_Stream* handle, std::function<void()> work) {
  auto stream = stream_of(comm, handle);
  if (joins_group(handle)) {
    group.collectives.push_back(std::move(work));
    return;
  }
  stream->enqueue(std::move(work));
}

void transfer(H2_Comm* handle, ShmComm::Transfer t, H2_Stream* stream_handle) {
  std::shared_ptr<Comm> comm = comms().get(handle);
  auto stream = stream_of(*comm, stream_handle);
  comm->shm.check_peer(t.peer);  // refused at the call, not later on the stream
  if (joins_group(stream_handle)) {
    group.transfers[comm].push_back(t);
    return;
  }
  stream->enqueue([comm, t] {
    std::vector<ShmComm::Transfer> one{t};
    comm->shm.exchange(one);
  });
}

H2_Status get_unique_id(H2_CommUniqueId* id) {
  return guarded("get_unique_id", [&] {
    require(id, "id");
    *id = H2_CommUniqueId{};
    h2::plugin::new_shm_comm_id(id->bytes);
  });
}

H2_Status comm_init_rank(int32_t device, const H2_CommUniqueId* id, int32_t nranks, int32_t rank, uint32_t timeout_ms,
                         H2_Comm** comm) {
  return guarded("comm_init_rank", [&] {
    require(id, "id");
    require(comm, "comm");
    runtime().memory(device);  // a device of this plugin
    const std::chrono::milliseconds timeout(timeout_ms > 0 ? timeout_ms : 300'000);
    // The communicator owns the arenas it maps; they are opened on the stream's thread only, as the
    // calls run.
    ShmComm::InPlace in_place{[peers = std::make_shared<PeerArenas>()](const ShmComm::Place& place, uint64_t bytes) {
                                return peers->open(place, bytes);
                              },
                              runtime().collectives_in_place()};
    auto made = std::shared_ptr<Comm>(new Comm{device, ShmComm(id->bytes, nranks, rank, timeout, std::move(in_place))});
    *comm = comms().add(std::move(made));
  });
}

H2_Status comm_destroy(H2_Comm* comm) {
  // Work still queued holds the communicator, which goes when the last of it has run.
  return guarded("comm_destroy", [&] { comms().take(comm); });
}

H2_Status comm_abort(H2_Comm* comm, const char* reason) {
  return guarded("comm_abort", [&] { comms().get(comm)->shm.abort(reason != nullptr ? reason : "aborted"); });
}

H2_Status allreduce(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                    H2_Stream* stream) {
  return guarded("allreduce", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    h2::plugin::check_collective_reduction(dtype, op);
    const uint64_t bytes = bytes_of(count, dtype);
    const void* from = resolve_device(send, bytes, "send");
    void* into = resolve_device(recv, bytes, "recv");
    issue(*comm, stream, [comm, from, into, count, dtype, op, places = std::array{place_of(send), place_of(recv)}] {
      comm->shm.allreduce(from, into, count, dtype, op, &places[0], &places[1]);
    });
  });
}

H2_Status reduce_scatter(H2_Comm* handle, const void* send, void* recv, uint64_t recv_count, uint32_t dtype,
                         uint32_t op, H2_Stream* stream) {
  return guarded("reduce_scatter", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    h2::plugin::check_collective_reduction(dtype, op);
    const uint64_t bytes = bytes_of(recv_count, dtype);
    const void* from = resolve_device(send, bytes * static_cast<uint64_t>(comm->shm.size()), "send");
    void* into = resolve_device(recv, bytes, "recv");
    issue(*comm, stream, [comm, from, into, recv_count, dtype, op, place = place_of(send)] {
      comm->shm.reduce_scatter(from, into, recv_count, dtype, op, &place);
    });
  });
}

H2_Status allgather(H2_Comm* handle, const void* send, void* recv, uint64_t send_count, uint32_t dtype,
                    H2_Stream* stream) {
  return guarded("allgather", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    const uint64_t bytes = bytes_of(send_count, dtype);
    const void* from = resolve_device(send, bytes, "send");
    void* into = resolve_device(recv, bytes * static_cast<uint64_t>(comm->shm.size()), "recv");
    issue(*comm, stream, [comm, from, into, send_count, dtype, place = place_of(send)] {
      comm->shm.allgather(from, into, send_count, dtype, &place);
    });
  });
}

H2_Status broadcast(H2_Comm* handle, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                    H2_Stream* stream) {
  return guarded("broadcast", [&] {
    std::shared_ptr<Comm> comm = comms().get(handle);
    if (root < 0 || root >= comm->shm.size())
      fail(H2_STATUS_INVALID_ARGUMENT, "root " + std::to_string(root) + " of " + std::to_string(comm->shm.size()));
    const uint64_t bytes = bytes_of(count, dtype);
    const void* from = comm->shm.rank() == root ? resolve_device(send, bytes, "send") : nullptr;
    void* into = resolve_device(recv, bytes, "recv");
    issue(*comm, stream, [comm, from, into, count, dtype, root, place = place_of(from != nullptr ? send : nullptr)] {
      comm->shm.broadcast(from, into, count, dtype, root, &place);
    });
  });
}

H2_Status send(H2_Comm* comm, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("send", [&] {
    const uint64_t bytes = bytes_of(count, dtype);
    transfer(comm, {.send = true, .peer = peer, .from = resolve_device(buffer, bytes, "buffer"), .bytes = bytes},
             stream);
  });
}

H2_Status recv(H2_Comm* comm, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  return guarded("recv", [&] {
    const uint64_t bytes = bytes_of(count, dtype);
    transfer(comm, {.send = false, .peer = peer, .into = resolve_device(buffer, bytes, "buffer"), .bytes = bytes},
             stream);
  });
}

H2_Status group_start() {
  return guarded("group_start", [&] { ++group.depth; });
}

H2_Status group_end() {
  return guarded("group_end", [&] {
    if (group.depth == 0) fail(H2_STATUS_INVALID_ARGUMENT, "group_end without group_start");
    if (--group.depth > 0) return;
    Group issued = std::move(group);
    group = Group{};
    if (issued.stream == nullptr) return;  // an empty group
    runtime().stream(issued.stream)->enqueue([issued = std::make_shared<Group>(std::move(issued))] {
      for (const auto& work : issued->collectives) work();
      for (auto& [comm, transfers] : issued->transfers) comm->shm.exchange(transfers);
    });
  });
}

}  // namespace

const H2_CollectiveTable kCollectiveTable = {
    .struct_size = sizeof(H2_CollectiveTable),
    .library_name = "cpu-reference shared memory",
    .scope = H2_COMM_SCOPE_NODE,
    .unique_id_bytes = h2::plugin::kShmCommIdBytes,
    .get_unique_id = get_unique_id,
    .comm_init_rank = comm_init_rank,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .allreduce = allreduce,
    .reduce_scatter = reduce_scatter,
    .allgather = allgather,
    .broadcast = broadcast,
    .send = send,
    .recv = recv,
    .group_start = group_start,
    .group_end = group_end,
};

}  // namespace h2::cpu_reference
