// The algorithms behind Communicator's collectives, each written as one transfer program
// (transfer.hpp) whose pieces flow through the algorithm's steps as a pipeline: ring reduce-scatter
// and allgather for large messages (bandwidth-optimal), recursive halving and doubling for large
// allreduces over a power-of-two number of ranks, recursive doubling for small allreduces,
// binomial tree and pipelined chain for broadcast.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transfer.hpp"
#include "world.hpp"

namespace h2::dicomm::detail {

// Balanced segments of [0, count) over `parts`, each cut into pieces of at most `piece_elements`.
struct Layout {
  struct Piece {
    int index;  // among all pieces of the layout, in order
    int64_t begin, end;
  };
  Layout(int64_t count, int parts, int64_t piece_elements);
  // Where segment `segment` of [0, count) cut into `parts` balanced segments begins.
  static int64_t segment_begin(int64_t count, int parts, int segment);
  int64_t begin(int segment) const { return segment_begin(count, parts, segment); }
  int64_t end(int segment) const { return begin(segment + 1); }
  std::vector<std::vector<Piece>> segments;
  int pieces = 0;
  int64_t count;
  int parts;
};

// A flat tensor cut like a Layout, its pieces entered on a Board from index `first`.
struct Region {
  Tensor flat;
  int first = 0;
  Tensor piece(const Layout::Piece& p) const { return flat.slice(0, p.begin, p.end); }
  int index(const Layout::Piece& p) const { return first + p.index; }
};

// Scratch memory a reduction receives into, slot by slot (slot i % count for the i-th receive):
// the Board makes a receive wait until the reduction that read its slot last time has run.
struct ScratchSlots {
  Region region;
  int count = 0;
  int64_t slot_elements = 0;
  int next = 0;
  // The next slot, cut to `numel` elements, and its Board index.
  std::pair<Tensor, int> take(int64_t numel);
};

// One collective call on one communicator: its tags, its device Link and its transfer program.
class Collective {
 public:
  // Orders the collective after the work on `stream` so far.
  Collective(CommState& comm, Stream& stream, const Device& device, std::string name);

  int size() const { return static_cast<int>(comm_.members.size()); }
  int rank() const { return comm_.rank; }
  int mod(int r) const { return ((r % size()) + size()) % size(); }
  Link& link() { return link_; }
  const Device& device() const { return device_; }
  // Recorded on the caller's stream at the start: the inputs are ready when it is.
  const std::shared_ptr<Event>& input_ready() const { return input_ready_; }
  // Records the work DiComm enqueued so far on its own stream.
  std::shared_ptr<Event> record();

  // Pieces of `count` elements of `dtype` cut into `parts` segments: a few per segment, so a step
  // is a pipeline, but not so small that per-message costs dominate.
  int64_t piece_elements(int64_t count, int parts, DType dtype) const;
  // Enters `flat`'s pieces on the Board; they are usable once `ready` has completed.
  Region region(const Tensor& flat, const Layout& layout, const std::shared_ptr<Event>& ready);
  // `count` slots of `slot_elements` of `dtype` from the Link's scratch memory.
  ScratchSlots scratch_slots(int count, int64_t slot_elements, DType dtype);

  // Appends to the program a send of `piece` of `from` to communicator rank `peer`.
  void send(int peer, const Region& from, const Layout::Piece& piece);
  // A receive of `piece` of `into` from communicator rank `peer`; complete it, then add().
  Transfer::Recv recv(int peer, const Region& into, const Layout::Piece& piece) const;
  void add(Transfer::Recv recv) { transfer_->add(std::move(recv)); }
  // Runs the program to its end (throws CommError on failure).
  void run();

  // Device memory for the call, from the Link's pool, for device work on the Link's stream (which
  // runs after the memory's previous use) and for sends; given back at finish().
  Tensor scratch(int64_t numel, DType dtype);
  // The caller's stream waits for everything DiComm enqueued.
  void finish(Stream& stream);

  static constexpr size_t kWindow = 8;  // pieces in flight each way

 private:
  CommState& comm_;
  Device device_;
  Link& link_;
  std::string name_;
  uint32_t sequence_;
  std::shared_ptr<Event> input_ready_;
  std::shared_ptr<Board> board_;
  std::shared_ptr<Transfer> transfer_;
  std::vector<Tensor> scratch_;
};

// Called for each piece of the segment a reduce-scatter leaves fully reduced on this rank, to
// finish it (average, cast into the result): sets the receive's `then` and `then_piece`.
using FinishPiece = std::function<void(Transfer::Recv&, const Layout::Piece&)>;

// Appends a ring reduce-scatter of `work` (cut by `layout` into size() segments): afterwards
// segment rank() holds the reduction of every rank's segment rank().
void ring_reduce_scatter(Collective& c, const Region& work, const Layout& layout, ops::BinaryOp op,
                         const FinishPiece& finish);
// Appends an allreduce for a power-of-two number of ranks (Rabenseifner's): a reduce-scatter by
// recursive halving of `work` (cut by `layout` into size() segments) and an allgather by recursive
// doubling into `result` (`work` itself, or a buffer that `finish` fills from it). log2(n) exchanges
// each way against the ring's n-1, each between two ranks that both wait for it, with the ring's
// volume on the wire. The nearest partner (rank ^ 1) takes the largest exchange, the farthest the
// smallest: on ranks numbered node by node, the slow links carry the least.
void halving_doubling_allreduce(Collective& c, const Region& work, const Region& result, const Layout& layout,
                                ops::BinaryOp op, const FinishPiece& finish);
// Appends a ring allgather: every segment of `data` is filled from its owner; segment rank() is this
// rank's.
void ring_allgather(Collective& c, const Region& data, const Layout& layout);
// Appends a recursive-doubling allreduce of `work` (one segment); every rank ends with the
// reduction of every rank's `work`, bit-identical everywhere, in the returned region (`work` or
// `other`, a buffer of the same shape).
Region recursive_doubling_allreduce(Collective& c, const Region& work, const Region& other, const Layout& layout,
                                    ops::BinaryOp op);
void tree_broadcast(Collective& c, const Region& data, const Layout& layout, int root);
void chain_broadcast(Collective& c, const Region& data, const Layout& layout, int root);

}  // namespace h2::dicomm::detail
