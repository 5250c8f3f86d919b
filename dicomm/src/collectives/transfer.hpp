// A transfer: an ordered program of piece sends and receives that the progress engine moves along,
// each operation starting as soon as what it depends on is done, a bounded number in flight.
// A point-to-point message is a transfer of sends (or receives) alone. A collective is one
// transfer of all its steps, so its pieces flow through the steps as a pipeline: a piece received
// and reduced in one step is sent on in the next while later pieces are still arriving (NCCL's
// ring works the same way). Running the steps one after the other instead left the wire idle
// during every reduction and the reduction idle during every transfer.
//
// Pieces are the unit on the wire: both sides cut a buffer into the same pieces, so a rank that
// stages through host memory talks to one that does not.
//
// Dependencies are tracked per piece of a Board (a stretch of a buffer, or a scratch slot), from
// the order in which operations are added to the program:
// - a send of piece p starts once every receive that writes p and was added before it has landed,
//   and the device work on p recorded then (a reduction, a copy) has run;
// - a receive is posted once, for every piece it writes (where the bytes land, where a reduction
//   puts its result, where a finishing step writes), every send of that piece added before it has
//   completed (the NIC may read the piece until then) and every receive into it added before it
//   has landed; and the device work on the piece the NIC writes has run.
// Sends start in program order, receives are posted in program order (messages with one tag match
// in posting order) and land in program order (a reduction may read what an earlier one wrote);
// at most `window` of each are in flight.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "h2/ops.hpp"
#include "h2/tensor.hpp"
#include "transport/engine.hpp"
#include "transport/link.hpp"

namespace h2::dicomm::detail {

// Where each piece of a transfer's buffers stands.
struct Board {
  struct Piece {
    int landed = 0;                // receives that wrote it and have landed
    int sent = 0;                  // sends of it that have completed
    std::shared_ptr<Event> event;  // device work on it that must finish first, if any
  };
  std::vector<Piece> pieces;

  // Adds `count` pieces whose contents are usable once `ready` has completed; returns the first's index.
  int add(int count, const std::shared_ptr<Event>& ready);
  bool event_done(int piece) {
    auto& event = pieces[static_cast<size_t>(piece)].event;
    if (event && event->ready()) event.reset();
    return !event;
  }
};

class Transfer : public Task {
 public:
  struct Send {
    int peer = -1;  // world rank
    uint64_t tag = 0;
    Tensor source;   // 1-D contiguous
    int piece = -1;  // Board index of the source
  };
  struct Recv {
    int peer = -1;
    uint64_t tag = 0;
    Tensor into;     // 1-D contiguous: where the bytes land
    int piece = -1;  // Board index of `into`
    // Optional reduction after landing: output = op(base, into); `base` undefined: output itself.
    std::optional<ops::BinaryOp> reduce;
    Tensor base, output;
    int output_piece = -1;
    // Optional device work after that (averaging, a cast into the result) writing `then_piece`.
    std::function<void(Stream&)> then;
    int then_piece = -1;
  };

  Transfer(Engine& engine, Link& link, std::shared_ptr<Board> board, std::string name, size_t window = 8);

  // Building the program (before the engine runs it).
  void add(Send send);
  void add(Recv recv);
  bool empty() const { return sends_.empty() && recvs_.empty(); }
  // Hands nothing to the engine until `predecessor` has handed it all of its operations. Messages
  // with one tag between two ranks match in the order posted, and a transfer keeps at most `window`
  // in flight: without this, a short message would overtake the rest of a long one sent before it.
  void follow(std::shared_ptr<const Transfer> predecessor) { predecessor_ = std::move(predecessor); }
  // Every operation is with the engine, and its predecessor's were before them (or the transfer is
  // over: a failed one never hands over the rest, and what follows it must not wait for that). An
  // empty message has no operations, yet what follows it must still wait for what came before it.
  bool handed_over() const { return finished() || (!predecessor_ && handed_ == sends_.size() + recvs_.size()); }

  bool advance() override;
  std::string describe() const override;

 private:
  enum class State { waiting, staging, posted, landing, done };
  // A piece an operation waits for: sends and receives of it added before the operation.
  struct Guard {
    int piece = -1;
    int sends_before = 0;
    int recvs_before = 0;
  };
  struct SendState {
    Send op;
    int recvs_before = 0;
    State state = State::waiting;
    std::shared_ptr<StagingSlot> slot;
    OpPtr fabric_op;
  };
  struct RecvState {
    Recv op;
    Guard guards[3];  // the pieces it writes: into, output, then
    int guard_count = 0;
    State state = State::waiting;
    std::shared_ptr<StagingSlot> slot;
    OpPtr fabric_op;
  };

  Guard guard(int piece) const;
  bool can_post(RecvState& r);
  bool can_send(SendState& s);
  bool post_receives();
  bool land_receives();
  bool advance_sends();
  void land(RecvState& r);
  std::shared_ptr<Event> record();
  Board::Piece& piece(int index) { return board_->pieces[static_cast<size_t>(index)]; }

  Engine& engine_;
  Link& link_;
  std::shared_ptr<Board> board_;
  std::string name_;
  size_t window_;
  std::vector<SendState> sends_;
  std::vector<RecvState> recvs_;
  std::vector<int> sends_added_, recvs_added_;  // per piece, while the program is built
  size_t next_send_ = 0, next_recv_ = 0;        // the next to start
  size_t first_send_ = 0, first_recv_ = 0;      // the first not done
  size_t active_sends_ = 0, active_recvs_ = 0;
  size_t done_ = 0;
  size_t handed_ = 0;  // operations handed to the engine
  std::shared_ptr<const Transfer> predecessor_;
};

// The bytes `t`'s elements take (contiguous tensors: the bytes a message of it carries).
size_t bytes_of(const Tensor& t);

// Sends `source` (contiguous, in memory `link` lets the NIC read directly) to world rank `peer` as
// one message, from where it lies. A node peer that maps `link`'s device memory reads it there.
OpPtr send_in_place(Engine& engine, Link& link, int peer, uint64_t tag, const Tensor& source);

}  // namespace h2::dicomm::detail
