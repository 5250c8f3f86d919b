// The algorithms behind Communicator's collectives, written as sequences of steps (step.hpp):
// ring reduce-scatter and allgather for large messages (bandwidth-optimal, pipelined in pieces),
// recursive doubling for small allreduces, binomial tree and pipelined chain for broadcast.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "step.hpp"
#include "world.hpp"

namespace h2::dicomm::detail {

// Balanced segments of [0, count) over `parts`, each cut into pieces of at most piece_bytes.
struct Layout {
  struct Piece {
    int index;  // Board index
    int64_t begin, end;
  };
  Layout(int64_t count, int parts, size_t element_bytes, size_t piece_bytes);
  // Where segment `segment` of [0, count) cut into `parts` balanced segments begins.
  static int64_t segment_begin(int64_t count, int parts, int segment);
  int64_t begin(int segment) const { return segment_begin(count, parts, segment); }
  int64_t end(int segment) const { return begin(segment + 1); }
  int64_t largest() const;
  std::vector<std::vector<Piece>> segments;
  int pieces = 0;
  int64_t count;
  int parts;
};

// One collective call on one communicator: its tags, its device Link and its steps.
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

  // A board over `layout` whose pieces are all ready once `ready` has completed.
  std::shared_ptr<Board> board(const Layout& layout, const std::shared_ptr<Event>& ready) const;
  StepTask::Send send(int peer, const Tensor& flat, const Layout::Piece& piece) const;
  StepTask::Recv recv(int peer, const Tensor& flat, const Layout::Piece& piece) const;
  void run(const std::shared_ptr<Board>& board, std::optional<ops::BinaryOp> reduce, std::vector<StepTask::Send> sends,
           std::vector<StepTask::Recv> recvs, const std::string& step);
  // Device memory for the call, from the Link's pool; given back at finish().
  Tensor scratch(int64_t numel, DType dtype);
  // The caller's stream waits for everything DiComm enqueued.
  void finish(Stream& stream);

 private:
  CommState& comm_;
  Device device_;
  Link& link_;
  std::string name_;
  uint32_t sequence_;
  std::shared_ptr<Event> input_ready_;
  std::vector<Tensor> scratch_;
};

// Reduces `work` (1-D, contiguous) so that segment rank() of `layout` holds the reduction of every
// rank's segment. `ready`: when `work` may be read.
void ring_reduce_scatter(Collective& c, const Tensor& work, ops::BinaryOp op, const std::shared_ptr<Event>& ready);
// Fills every segment of `data` from its owner; segment rank() is this rank's, ready with `ready`.
void ring_allgather(Collective& c, const Tensor& data, const std::shared_ptr<Event>& ready);
// Every rank ends with the reduction of every rank's `work`, bit-identical everywhere. Returns the
// tensor holding it (`work` or a buffer of the same shape).
Tensor recursive_doubling_allreduce(Collective& c, const Tensor& work, ops::BinaryOp op,
                                    const std::shared_ptr<Event>& ready);
void tree_broadcast(Collective& c, const Tensor& data, int root);
void chain_broadcast(Collective& c, const Tensor& data, int root);

}  // namespace h2::dicomm::detail
