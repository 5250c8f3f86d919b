// Collectives between the processes of one node over a shared-memory segment: the engine behind
// cpu-reference's collective library (ABI 1.5, plugin_abi.h section 9), and the one the accelerator
// emulators can put under their emulated HCCL and CNCL. It works on host pointers and blocks the
// calling thread (a stream's worker) until the call is done; the plugin resolves device pointers and
// orders each call on its stream.
//
// The segment (POSIX shared memory, named by the unique id and unlinked once every rank has mapped
// it) holds a control block, each rank's counters, one slot per rank and a result region for
// collectives, and one channel per ordered pair of ranks for point-to-point. A collective runs in
// steps of at most a slot: every rank writes its part into its own slot, says so, waits until every
// rank has, and reads what it needs from all slots. An allreduce's step is two: each rank reduces its
// share of the chunk over all slots (in rank order, so every element is computed once, the same for
// all) into the result region, then all copy the result out. A rank overwrites its slot only once
// every rank has finished reading the previous step.
//
// Where the plugin can say where a buffer lies for the node's other processes (InPlace), a call of
// at least a given size runs on the ranks' buffers in place instead: every rank publishes the
// places of its buffers in its slot, opens the others', and once all could, each reads the others'
// buffers directly (an allreduce rank reduces its share of every rank's input into its own output,
// then reads the other shares from the other ranks' outputs). A rank writes into its own buffers
// only, so a rank whose call failed and returned finds nobody writing into its memory. That moves
// each byte once or twice rather than three times, in three steps whatever the size (four for an
// allreduce). Where any rank's buffer has no place, every rank takes the segment's path for that
// call; where a rank cannot open a place at all, for the communicator's remaining calls.
//
// A communicator's calls run one at a time, in the order issued (the plugin issues them on one
// stream, or the caller orders its streams). Waits sleep on a futex in the segment and end with a
// PluginError(H2_STATUS_DEVICE_ERROR) naming what was awaited when: the communicator was aborted (by any rank: abort()
// marks the segment), a rank's process has exited, or nothing arrived for the communicator's timeout.
// The last two abort the communicator with that message, so every rank's failure names the cause.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"

namespace h2::plugin {

// The bytes of an id: a magic word, this host's name (ranks on another host are refused) and 16
// random bytes naming the segment. A library's larger id type (H2_CommUniqueId, an emulated HCCL's
// HcclRootInfo) carries them first.
constexpr size_t kShmCommIdBytes = 88;

// Writes a new id to `id`'s first kShmCommIdBytes bytes.
void new_shm_comm_id(uint8_t* id);

class ShmComm {
 public:
  static constexpr int kMaxRanks = 256;

  // Where a buffer lies for the node's other processes, in the plugin's own encoding.
  static constexpr size_t kPlaceBytes = 64;
  struct Place {
    bool known = false;  // false: this buffer cannot be opened from another process
    uint8_t bytes[kPlaceBytes] = {};
  };
  // A host pointer in this process to `bytes` at a place another rank published, or nullptr when
  // this process cannot open it. Called on the calling thread during a call; what it opens stays
  // the plugin's to keep (a cache) and to release.
  using OpenPlace = std::function<char*(const Place& place, uint64_t bytes)>;
  // Calls of at least `from_bytes` (every rank's count alike) run in place, opening the other
  // ranks' places with `open`; none do without `open` or with `from_bytes` 0, or once `open` has
  // failed on any rank.
  struct InPlace {
    OpenPlace open;
    uint64_t from_bytes = 0;
  };

  // Joins the communicator `id` names as `rank` of `ranks`. Blocks until all have joined. Throws
  // PluginError: INVALID_ARGUMENT for a foreign id, ranks that disagree on the count or on
  // `in_place`'s size, UNSUPPORTED for an id made on another host, OUT_OF_MEMORY when the segment
  // does not fit /dev/shm, DEVICE_ERROR naming the ranks missing after `timeout`.
  ShmComm(const uint8_t* id, int ranks, int rank, std::chrono::milliseconds timeout, InPlace in_place);
  // Never in place.
  ShmComm(const uint8_t* id, int ranks, int rank, std::chrono::milliseconds timeout);
  ~ShmComm();
  ShmComm(const ShmComm&) = delete;
  ShmComm& operator=(const ShmComm&) = delete;

  // How long each later wait may last (the constructor's `timeout` bounds joining).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  // How many collectives ran in place so far (tests and diagnostics).
  uint64_t calls_in_place() const { return calls_in_place_; }

  // Throws PluginError(INVALID_ARGUMENT) unless `peer` is another rank of this communicator.
  void check_peer(int peer) const;

  // As plugin_abi.h section 9 says, on host pointers; `dtype` an H2_DType, `op` an H2_ReduceOp.
  // Reductions add in f32 for f16 and bf16 (rounded once), in the dtype otherwise, in rank order:
  // the same bytes on either path. `*_place` say where the buffers lie for the other ranks (null:
  // nowhere they can open).
  void allreduce(const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                 const Place* send_place = nullptr, const Place* recv_place = nullptr);
  void reduce_scatter(const void* send, void* recv, uint64_t recv_count, uint32_t dtype, uint32_t op,
                      const Place* send_place = nullptr);
  void allgather(const void* send, void* recv, uint64_t send_count, uint32_t dtype, const Place* send_place = nullptr);
  void broadcast(const void* send, void* recv, uint64_t count, uint32_t dtype, int root,
                 const Place* send_place = nullptr);

  // One point-to-point transfer of `bytes`: from `data` to `peer` (send), or from `peer` into `data`.
  struct Transfer {
    bool send = true;
    int peer = 0;
    const void* from = nullptr;  // send
    void* into = nullptr;        // receive
    uint64_t bytes = 0;
    uint64_t done = 0;
  };
  // Runs every transfer to its end, progressing them together (a send to and a receive from one
  // peer do not wait for each other); transfers to one peer in one direction go in order.
  void exchange(std::vector<Transfer>& transfers);

  // Marks the communicator aborted for every rank: their waits, and this rank's, fail naming `reason`.
  // Any thread, any time.
  void abort(const std::string& reason) noexcept;

 private:
  struct Control;
  struct RankState;
  struct Channel;
  Control& control() const;
  RankState& state(int rank) const;
  Channel& channel(int from, int to) const;
  char* slot(int rank) const;
  char* channel_data(int from, int to) const;
  // Waits until `ready()` holds; `waiting_for()` says what, for the failure's message. A wait that
  // fails on a rank's exit or the timeout aborts the communicator for every rank (give_up).
  void wait(const std::function<bool()>& ready, const std::function<std::string()>& waiting_for);
  // Aborts the communicator with `why` and throws PluginError(DEVICE_ERROR) saying it.
  [[noreturn]] void give_up(const std::string& why);
  // abort(); true when this call was the first abort of the communicator.
  bool mark_aborted(const std::string& reason) noexcept;
  void ring() const;
  // Throws PluginError(DEVICE_ERROR) naming who aborted and why, once the communicator is aborted.
  void check_aborted() const;
  // One collective step: every rank puts its part (`put`, into its slot; may do nothing), then reads
  // (`take`, from every slot) once every rank in `from` has put its part (all when empty).
  void step(const char* call, const std::function<void(char*)>& put, const std::function<void()>& take,
            int only_from = -1);

  // Every rank's buffers, when the call (`bytes` in all) is large enough and every rank could open
  // the places the others published (one step to publish, one to agree): `sends[r]` where needed
  // and `recvs[r]` when `peer_recvs`, else only this rank's own. False, on every rank alike, when
  // the call runs through the segment instead.
  struct InPlaceCall {
    const void* send = nullptr;
    const Place* send_place = nullptr;
    uint64_t send_bytes = 0;
    void* recv = nullptr;
    const Place* recv_place = nullptr;
    uint64_t recv_bytes = 0;
    bool peer_recvs = false;  // every rank's output is read, not only this rank's written
    int send_from = -1;       // the only rank whose input is needed (a broadcast's root); -1: all
  };
  struct Buffers {
    std::vector<const char*> sends;
    std::vector<char*> recvs;
  };
  bool open_in_place(const char* call, uint64_t bytes, const InPlaceCall& c, Buffers& buffers);
  // Elements reduced at a time in place: the accumulator stays in cache.
  static constexpr uint64_t kInPlacePiece = 16384;
  // The last step of a call in place: no rank returns (and lets its buffers change) while another
  // still reads or writes them.
  void finish_in_place(const char* call);

  InPlace in_place_;
  std::string name_;
  int size_ = 0, rank_ = 0;
  std::chrono::milliseconds timeout_;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t slot_bytes_ = 0, channel_bytes_ = 0;
  size_t ranks_at_ = 0, channels_at_ = 0, slots_at_ = 0, result_at_ = 0, channel_data_at_ = 0;
  uint32_t steps_ = 0;  // collective steps taken (every rank takes the same)
  uint64_t calls_in_place_ = 0;
};

}  // namespace h2::plugin
