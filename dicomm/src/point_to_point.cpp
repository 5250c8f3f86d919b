// Point-to-point: isend and irecv as Transfers that follow the last message of their tag, and
// blocking send and recv as one engine operation where that keeps the same promises.
#include <functional>
#include <memory>
#include <string>

#include "collectives/collective.hpp"
#include "communicator_checks.hpp"
#include "h2/dicomm/communicator.hpp"

namespace h2::dicomm {

namespace detail {

struct RequestState {
  std::shared_ptr<World> world;
  std::shared_ptr<Transfer> task;
  std::function<void()> on_complete;  // joins the caller's stream, once, in the caller's thread
  bool completed = false;
};

namespace {

// What isend and irecv share: a transfer of the tensor cut into pieces on its device's Link, every
// piece usable once the work enqueued on the caller's stream so far has run.
struct PointToPoint {
  Link& link;
  Region data;  // the tensor, flat
  Layout layout;
  std::shared_ptr<Transfer> transfer;
};

PointToPoint prepare_point_to_point(CommState& s, Stream& stream, const Tensor& tensor, std::string name) {
  Link& link = s.world->link(tensor.device());
  const std::shared_ptr<Event> ready = link.event_after(stream);
  // Only a staged transfer puts device work (its copies) on the Link's stream. A direct one waits for
  // `ready` through the Board, so it does not hold the Link's stream, which every communicator on
  // the device shares, behind the caller's compute.
  if (ready && !link.direct()) link.wait_for(*ready);
  const Tensor data = flat(tensor);
  Layout layout(data.numel(), 1, static_cast<int64_t>(link.piece_bytes() / dtype_size(data.dtype())));
  auto board = std::make_shared<Board>();
  const int first = board->add(layout.pieces, ready);
  auto transfer = std::make_shared<Transfer>(s.world->engine(), link, std::move(board), std::move(name));
  return {link, Region{data, first}, std::move(layout), std::move(transfer)};
}

// "send of f32[4] to rank 1 of communicator 'world' (tag 0)", for errors and timeouts.
std::string message_name(const CommState& s, bool is_send, const Tensor& tensor, int peer, uint32_t tag) {
  return std::string(is_send ? "send of " : "receive of ") + tensor.describe() +
         (is_send ? " to rank " : " from rank ") + std::to_string(peer) + " of communicator '" + s.name + "' (tag " +
         std::to_string(tag) + ")";
}

// A blocking send or receive as one operation of the engine, where that keeps every promise of the
// Transfer route: the tensor is one piece (both sides cut a message alike, so either may take
// either route), the NIC reaches its memory, the caller's stream has nothing queued (the data is
// final, and nothing reads or writes it meanwhile), and nothing of this process's is in flight (so
// it cannot overtake an earlier message with its tag). Otherwise returns false, having done nothing.
// Why: the Transfer route (a Board, a Transfer, a Request, a dozen allocations and their release)
// adds microseconds between one message's arrival and the next send, and under BBR's pacing on
// loopback each of those cost a 1 MiB tcp ping-pong 10-15 us: 235 us a transfer against 174 us this
// way, where fi_pingpong took 158 (medians of 8 interleaved runs; issue 7).
bool single_operation(const CommState& s, Stream& stream, const Tensor& tensor, int to, int peer, uint32_t tag,
                      bool is_send) {
  Engine& engine = s.world->engine();
  const size_t bytes = bytes_of(tensor);
  if (bytes == 0 || !engine.idle() || !stream.ready()) return false;
  Link& link = s.world->link(tensor.device());
  if (!link.direct() || bytes > link.piece_bytes()) return false;
  const OpPtr op = is_send
                       ? send_in_place(engine, link, to, make_tag(TagKind::p2p, s.id, s.members[s.rank], tag), tensor)
                       : engine.recv(to, make_tag(TagKind::p2p, s.id, to, tag), tensor.data(), bytes, tensor.buffer());
  engine.wait(op, [&] { return message_name(s, is_send, tensor, peer, tag); });
  return true;
}

}  // namespace

}  // namespace detail

using namespace detail;

// ---- Requests ----

bool Request::test() {
  if (!state_) return true;
  if (!state_->completed) {
    Engine& engine = state_->world->engine();
    engine.progress();
    if (!state_->task->finished()) {
      engine.throw_if_failed();
      return false;
    }
    wait();
  }
  return true;
}

void Request::wait() {
  if (!state_ || state_->completed) return;
  state_->world->engine().wait_task(*state_->task);
  if (state_->on_complete) state_->on_complete();
  state_->completed = true;
}
Request Communicator::start_send(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  check_tensor("isend", "the tensor", tensor);
  const int to = world_rank(peer);
  CommState& s = const_cast<CommState&>(state());
  PointToPoint p = prepare_point_to_point(s, stream, tensor, message_name(s, true, tensor, peer, tag));
  const uint64_t wire_tag = make_tag(TagKind::p2p, s.id, s.members[s.rank], tag);
  for (const auto& piece : p.layout.segments[0])
    p.transfer->add(Transfer::Send{to, wire_tag, p.data.piece(piece), p.data.index(piece)});
  s.world->chain_point_to_point(true, to, wire_tag, p.transfer);
  s.world->engine().add_task(p.transfer);
  return Request(std::make_shared<RequestState>(RequestState{s.world, p.transfer, {}, false}));
}

Request Communicator::start_recv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  check_tensor("irecv", "the tensor", tensor);
  const int from = world_rank(peer);
  CommState& s = const_cast<CommState&>(state());
  PointToPoint p = prepare_point_to_point(s, stream, tensor, message_name(s, false, tensor, peer, tag));
  const uint64_t wire_tag = make_tag(TagKind::p2p, s.id, from, tag);
  for (const auto& piece : p.layout.segments[0]) {
    Transfer::Recv recv;
    recv.peer = from;
    recv.tag = wire_tag;
    recv.into = p.data.piece(piece);
    recv.piece = p.data.index(piece);
    p.transfer->add(std::move(recv));
  }
  s.world->chain_point_to_point(false, from, wire_tag, p.transfer);
  s.world->engine().add_task(p.transfer);
  Stream* caller = &stream;
  Link& link = p.link;
  auto join = [&link, caller] {
    if (const std::shared_ptr<Event> done = link.event_after(link.stream())) caller->wait(*done);
  };
  return Request(std::make_shared<RequestState>(RequestState{s.world, p.transfer, join, false}));
}

// The caller may compute before it waits: DiComm's background thread moves the message meanwhile.
Request Communicator::isend(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  Request request = start_send(stream, tensor, peer, tag);
  state().world->engine().wake_background();
  return request;
}

Request Communicator::irecv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  Request request = start_recv(stream, tensor, peer, tag);
  state().world->engine().wake_background();
  return request;
}

void Communicator::send(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  check_tensor("send", "the tensor", tensor);
  if (!single_operation(state(), stream, tensor, world_rank(peer), peer, tag, true))
    start_send(stream, tensor, peer, tag).wait();
}

void Communicator::recv(Stream& stream, const Tensor& tensor, int peer, uint32_t tag) const {
  check_tensor("recv", "the tensor", tensor);
  if (!single_operation(state(), stream, tensor, world_rank(peer), peer, tag, false))
    start_recv(stream, tensor, peer, tag).wait();
}
}  // namespace h2::dicomm
