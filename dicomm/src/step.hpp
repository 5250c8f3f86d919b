// One step of a transfer: a list of pieces to send and a list to receive (optionally reducing each
// received piece into the destination), moved by the progress engine with a bounded number in
// flight. Collectives are sequences of steps; a point-to-point transfer is one step.
//
// Pieces are the unit on the wire: both sides cut a buffer into the same pieces (piece_bytes is
// agreed by the whole job), so a rank that stages through host memory talks to one that does not.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine.hpp"
#include "h2/ops.hpp"
#include "h2/tensor.hpp"
#include "link.hpp"

namespace h2::dicomm::detail {

// Whether each piece of a collective's buffers may be read by the NIC yet. Shared by its steps: a
// piece received and reduced in one step is sent in the next.
struct Board {
  struct Piece {
    bool landed = true;            // no receive into it is outstanding
    std::shared_ptr<Event> event;  // device work on it that must finish first, if any
  };
  std::vector<Piece> pieces;

  explicit Board(size_t count) : pieces(count) {}
  bool landed(int piece) const { return piece < 0 || pieces[piece].landed; }
  bool ready(int piece) const {
    if (piece < 0) return true;
    const Piece& p = pieces[piece];
    return p.landed && (!p.event || p.event->ready());
  }
};

// A contiguous 1-D stretch of a tensor's elements.
struct Span {
  Tensor tensor;  // 1-D contiguous view
  size_t bytes() const { return static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype()); }
};

class StepTask : public Task {
 public:
  struct Send {
    int peer = -1;  // world rank
    uint64_t tag = 0;
    Span source;
    int piece = -1;  // Board index of the source (its readiness), or -1: ready now
  };
  struct Recv {
    int peer = -1;
    uint64_t tag = 0;
    Span destination;
    Tensor scratch;  // defined: receive here, then destination = reduce(base, scratch)
    Tensor base;     // the reduction's other operand; undefined: the destination itself
    int piece = -1;  // Board index of the destination, marked landed when it is usable
  };

  StepTask(Engine& engine, Link& link, std::shared_ptr<Board> board, std::optional<ops::BinaryOp> reduce,
           std::vector<Send> sends, std::vector<Recv> recvs, std::string name, size_t window = 8);

  bool advance() override;
  std::string describe() const override;

 private:
  enum class State { waiting, staging, posted, landing, done };
  struct SendState {
    Send send;
    State state = State::waiting;
    std::shared_ptr<StagingSlot> slot;
    OpPtr op;
  };
  struct RecvState {
    Recv recv;
    State state = State::waiting;
    std::shared_ptr<StagingSlot> slot;
    OpPtr op;
  };

  bool advance_receives();
  bool advance_sends();
  void land(RecvState& r);
  std::shared_ptr<Event> record();

  Engine& engine_;
  Link& link_;
  std::shared_ptr<Board> board_;
  std::optional<ops::BinaryOp> reduce_;
  std::vector<SendState> sends_;
  std::vector<RecvState> recvs_;
  std::string name_;
  size_t window_;
  size_t next_send_ = 0, next_recv_ = 0;
  size_t active_sends_ = 0, active_recvs_ = 0;
  size_t done_ = 0;
};

}  // namespace h2::dicomm::detail
