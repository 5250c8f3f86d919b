// One rank of the multi-process DiComm tests, started by `h2 launch` (test_collectives.cpp).
// `collectives_rank check` runs every collective and point-to-point check on this rank's device
// and exits 0 when all hold; the other modes play a failure and report what the survivors saw:
//   kill      the last rank dies (SIGKILL) in the middle of an allreduce
//   abort     rank 0 aborts with a reason
//   stall     the last rank never joins (the others must time out)
//   stop      the last rank stops itself (SIGSTOP) after joining: alive, silent
//   hang      the last rank hangs outside DiComm after joining: alive, its store heartbeat running
//   token     rank 1 presents a wrong job token
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/h2.hpp"

using h2::DType;
using h2::Tensor;
using h2::dicomm::Communicator;
using h2::dicomm::ReduceOp;

namespace {

int failures = 0;
int checks = 0;
std::string prefix;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    if (failures < 20) std::cerr << prefix << "FAILED: " << what << "\n";
  }
}

// Small integers: sums over 4 ranks stay exact in fp16 and bf16.
double value(int rank, int64_t i) {
  return static_cast<double>(((rank + 1) * 3 + i * 7) % 13 - 6);
}

std::vector<double> values(int rank, int64_t n, int64_t offset = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(rank, i + offset);
  return v;
}

double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-6 : dtype == DType::f64 ? 1e-12 : 8e-3;
}

bool close(double got, double want, DType dtype) {
  return std::abs(got - want) <= tolerance(dtype) * (1 + std::abs(want));
}

std::string name(const char* what, DType dtype, int64_t n) {
  return std::string(what) + " " + std::string(h2::dtype_name(dtype)) + "[" + std::to_string(n) + "]";
}

void check_allreduce(const Communicator& comm, h2::Stream& stream, const h2::Device& device, DType dtype, int64_t n,
                     ReduceOp op, h2::dicomm::Accumulation accumulation = h2::dicomm::Accumulation::wide) {
  const int size = comm.size();
  Tensor t = Tensor::from_host(stream, values(comm.rank(), n), {n}, dtype);
  comm.allreduce(stream, t, op, accumulation);
  const std::vector<double> got = t.to_host(stream);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    double want = op == ReduceOp::max ? -1e300 : 0;
    for (int r = 0; r < size; ++r) want = op == ReduceOp::max ? std::max(want, value(r, i)) : want + value(r, i);
    if (op == ReduceOp::avg) want /= size;
    if (!close(got[static_cast<size_t>(i)], want, dtype) && bad++ < 3)
      std::cerr << prefix << "  element " << i << ": " << got[static_cast<size_t>(i)] << ", expected " << want << "\n";
  }
  expect(bad == 0, name("allreduce", dtype, n) + " " + h2::dicomm::reduce_op_name(op));
  // Every rank must hold the very same bits: gather everyone's result and compare.
  if (n > 0 && n < 5000) {
    Tensor all = Tensor::empty(device, {size * n}, dtype);
    comm.allgather(stream, t, all);
    const std::vector<double> everyone = all.to_host(stream);
    std::string first_difference;
    for (int r = 0; r < size && first_difference.empty(); ++r)
      for (int64_t i = 0; i < n && first_difference.empty(); ++i)
        if (everyone[static_cast<size_t>(r * n + i)] != got[static_cast<size_t>(i)])
          first_difference = " (element " + std::to_string(i) + ": rank " + std::to_string(r) + " has " +
                             std::to_string(everyone[static_cast<size_t>(r * n + i)]) + ", this rank " +
                             std::to_string(got[static_cast<size_t>(i)]) + ")";
    expect(first_difference.empty(), name("allreduce", dtype, n) + " " + h2::dicomm::reduce_op_name(op) +
                                         " bit-identical on every rank" + first_difference);
  }
}

void check_reduce_scatter(const Communicator& comm, h2::Stream& stream, const h2::Device& device, DType dtype,
                          int64_t n, ReduceOp op,
                          h2::dicomm::Accumulation accumulation = h2::dicomm::Accumulation::wide) {
  const int size = comm.size();
  Tensor in = Tensor::from_host(stream, values(comm.rank(), size * n), {size * n}, dtype);
  Tensor out = Tensor::empty(device, {n}, dtype);
  comm.reduce_scatter(stream, in, out, op, accumulation);
  const std::vector<double> got = out.to_host(stream);
  const std::vector<double> input_after = in.to_host(stream);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = comm.rank() * n + i;
    double want = op == ReduceOp::max ? -1e300 : 0;
    for (int r = 0; r < size; ++r) want = op == ReduceOp::max ? std::max(want, value(r, at)) : want + value(r, at);
    if (op == ReduceOp::avg) want /= size;
    if (!close(got[static_cast<size_t>(i)], want, dtype)) ++bad;
  }
  expect(bad == 0, name("reduce_scatter", dtype, n) + " " + h2::dicomm::reduce_op_name(op));
  expect(input_after == in.to_host(stream) && input_after == values(comm.rank(), size * n),
         name("reduce_scatter", dtype, n) + " leaves its input alone");
}

void check_allgather(const Communicator& comm, h2::Stream& stream, const h2::Device& device, DType dtype, int64_t n) {
  const int size = comm.size();
  Tensor in = Tensor::from_host(stream, values(comm.rank(), n), {n}, dtype);
  Tensor out = Tensor::empty(device, {size * n}, dtype);
  comm.allgather(stream, in, out);
  const std::vector<double> got = out.to_host(stream);
  bool ok = true;
  for (int r = 0; r < size; ++r)
    for (int64_t i = 0; i < n; ++i) ok = ok && got[static_cast<size_t>(r * n + i)] == value(r, i);
  expect(ok, name("allgather", dtype, n));
}

void check_broadcast(const Communicator& comm, h2::Stream& stream, DType dtype, int64_t n, int root) {
  Tensor t = Tensor::from_host(stream, values(comm.rank(), n), {n}, dtype);
  comm.broadcast(stream, t, root);
  expect(t.to_host(stream) == values(root, n), name("broadcast", dtype, n) + " from rank " + std::to_string(root));
}

void check_point_to_point(const Communicator& comm, h2::Stream& stream, const h2::Device& device) {
  const int size = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  // Several messages with one tag arrive in the order sent; another tag interleaves freely; a
  // message of several pieces (3 MiB) and an empty one pass too.
  const std::vector<int64_t> lengths = {1, 17, 786432, 0, 5};
  std::vector<Tensor> outgoing, incoming;
  std::vector<h2::dicomm::Request> requests;
  for (size_t m = 0; m < lengths.size(); ++m) {
    incoming.push_back(Tensor::empty(device, {lengths[m]}, DType::f32));
    requests.push_back(comm.irecv(stream, incoming.back(), prev, m == 2 ? 9 : 4));
  }
  for (size_t m = 0; m < lengths.size(); ++m) {
    outgoing.push_back(
        Tensor::from_host(stream, values(rank, lengths[m], static_cast<int64_t>(m)), {lengths[m]}, DType::f32));
    requests.push_back(comm.isend(stream, outgoing.back(), next, m == 2 ? 9 : 4));
  }
  for (auto& request : requests) request.wait();
  for (size_t m = 0; m < lengths.size(); ++m)
    expect(incoming[m].to_host(stream) == values(prev, lengths[m], static_cast<int64_t>(m)),
           "point-to-point message " + std::to_string(m) + " (" + std::to_string(lengths[m]) + " floats) in order");
}

// Empty messages among others on one tag: an empty message moves nothing on the wire, yet the
// message after it must still wait for the one before (a staged sender's 17 floats were overtaken by
// the 5 after an empty message, which was "handed over" at once while the 17 were still copied out).
void check_empty_messages_keep_order(const Communicator& comm, h2::Stream& stream, const h2::Device& device) {
  if (comm.size() < 2 || comm.rank() > 1) return;
  const std::vector<int64_t> pattern = {17, 0, 5, 0, 0, 3000};
  constexpr int kRounds = 40;
  std::vector<Tensor> messages;
  std::vector<h2::dicomm::Request> requests;
  for (int round = 0; round < kRounds; ++round)
    for (size_t m = 0; m < pattern.size(); ++m) {
      const int64_t seed = round * 10 + static_cast<int64_t>(m);
      if (comm.rank() == 0) {
        messages.push_back(Tensor::from_host(stream, values(0, pattern[m], seed), {pattern[m]}, DType::f32));
        requests.push_back(comm.isend(stream, messages.back(), 1, 11));
      } else {
        messages.push_back(Tensor::empty(device, {pattern[m]}, DType::f32));
        requests.push_back(comm.irecv(stream, messages.back(), 0, 11));
      }
    }
  for (auto& request : requests) request.wait();
  if (comm.rank() == 0) return;
  bool in_order = true;
  for (int round = 0; round < kRounds; ++round)
    for (size_t m = 0; m < pattern.size(); ++m) {
      const int64_t seed = round * 10 + static_cast<int64_t>(m);
      in_order = in_order && messages[static_cast<size_t>(round) * pattern.size() + m].to_host(stream) ==
                                 values(0, pattern[m], seed);
    }
  expect(in_order, "messages on one tag with empty ones between them arrive in the order sent");
}

// Blocking send and recv between ranks 0 and 1, beside requests still open: a blocking call that
// finds nothing else in flight is one operation on the wire, otherwise it queues behind what is
// (a large message, several pieces where H2_DICOMM_PIECE_BYTES is small); with one tag, every
// message still arrives in the order sent, whichever way each side took.
void check_blocking_point_to_point(const Communicator& comm, h2::Stream& stream, const h2::Device& device) {
  if (comm.size() < 2 || comm.rank() > 1) return;
  const std::vector<int64_t> lengths = {600001, 17, 5, 300000};
  std::vector<Tensor> messages;
  for (size_t m = 0; m < lengths.size(); ++m)
    messages.push_back(comm.rank() == 0 ? Tensor::from_host(stream, values(0, lengths[m], static_cast<int64_t>(m)),
                                                            {lengths[m]}, DType::f32)
                                        : Tensor::empty(device, {lengths[m]}, DType::f32));
  if (comm.rank() == 0) {
    h2::dicomm::Request first = comm.isend(stream, messages[0], 1, 6);  // may still be moving
    comm.send(stream, messages[1], 1, 6);
    first.wait();
    comm.send(stream, messages[2], 1, 6);  // nothing in flight now
    comm.send(stream, messages[3], 1, 6);
  } else {
    comm.recv(stream, messages[0], 0, 6);
    h2::dicomm::Request second = comm.irecv(stream, messages[1], 0, 6);
    comm.recv(stream, messages[2], 0, 6);  // must not take message 1
    second.wait();
    comm.recv(stream, messages[3], 0, 6);
    for (size_t m = 0; m < lengths.size(); ++m)
      expect(messages[m].to_host(stream) == values(0, lengths[m], static_cast<int64_t>(m)),
             "blocking point-to-point message " + std::to_string(m) + " (" + std::to_string(lengths[m]) +
                 " floats) in order");
  }
}

// Messages of several parts (above the fabric's message size) that all arrive before their receives:
// the provider keeps them as unexpected, and each receive must still take its message's parts in
// order, the first message first.
void check_unexpected_parts(const Communicator& comm, h2::Stream& stream, const h2::Device& device) {
  if (comm.size() < 2 || comm.rank() > 1) return;
  const std::vector<int64_t> lengths = {300001, 200000, 150003};
  if (comm.rank() == 0) {
    std::vector<h2::dicomm::Request> sends;
    std::vector<Tensor> messages;
    for (size_t m = 0; m < lengths.size(); ++m) {
      messages.push_back(
          Tensor::from_host(stream, values(0, lengths[m], 7 * static_cast<int64_t>(m)), {lengths[m]}, DType::f32));
      sends.push_back(comm.isend(stream, messages.back(), 1, 8));
    }
    for (auto& send : sends) send.wait();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // everything arrives first
    for (size_t m = 0; m < lengths.size(); ++m) {
      Tensor in = Tensor::empty(device, {lengths[m]}, DType::f32);
      comm.recv(stream, in, 0, 8);
      expect(in.to_host(stream) == values(0, lengths[m], 7 * static_cast<int64_t>(m)),
             "message " + std::to_string(m) + " of 3 on one tag, received after it arrived, whole and in order");
    }
  }
}

// An isend moves while its caller does something else and never calls DiComm: DiComm's background
// thread must drive it (over tcp;ofi_rxm the receiver reads a large message from the sender, which
// needs the sender's progress). Rank 1 says it has the message through a file, not through DiComm.
void check_progress_without_a_waiter(const Communicator& comm, h2::Stream& stream, const h2::Device& device) {
  if (comm.size() < 2 || comm.rank() > 1) return;
  const int64_t n = 2 << 20;  // 8 MiB of floats: a rendezvous on every provider
  // The rendezvous port is unique among the jobs running on this machine.
  const char* port = std::getenv("H2_MASTER_PORT");
  const std::filesystem::path marker =
      std::filesystem::temp_directory_path() / ("h2-test-progress-" + std::string(port ? port : "0"));
  if (comm.rank() == 0) {
    std::filesystem::remove(marker);  // one an earlier job on this port may have left
    const Tensor out = Tensor::from_host(stream, values(0, n), {n}, DType::f32);
    h2::dicomm::Request request = comm.isend(stream, out, 1, 99);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // "computing"
    expect(std::filesystem::exists(marker), "an isend arrived while its sender did not wait (background progress)");
    request.wait();
    std::filesystem::remove(marker);
  } else {
    const Tensor in = Tensor::empty(device, {n}, DType::f32);
    comm.recv(stream, in, 0, 99);
    expect(in.to_host(stream) == values(0, n), "the isend that moved without a waiter");
    std::ofstream(marker) << "received\n";
  }
}

int run_checks(const Communicator& world, h2::Stream& stream, const h2::Device& device) {
  const int size = world.size();
  const std::vector<DType> dtypes = {DType::f32, DType::f16, DType::bf16};
  // Empty, one element, counts not divisible by the rank count, the small-message algorithm, the
  // ring, and the ring with several pieces per segment.
  const std::vector<int64_t> counts = {0, 1, 5, 1023, 40001, 700001};
  for (DType dtype : dtypes)
    for (int64_t n : counts)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        if (n == 700001 && dtype != DType::f32 && op != ReduceOp::sum) continue;  // keeps the test short
        check_allreduce(world, stream, device, dtype, n, op);
      }
  // 16-bit partial sums on the wire (the small-message algorithm and the ring); the values are small
  // integers, so even rounding at every step must give the exact sums, the same bits on every rank.
  for (DType dtype : {DType::f16, DType::bf16})
    for (int64_t n : {1023, 40001}) {
      check_allreduce(world, stream, device, dtype, n, ReduceOp::sum, h2::dicomm::Accumulation::narrow);
      check_reduce_scatter(world, stream, device, dtype, n, ReduceOp::sum, h2::dicomm::Accumulation::narrow);
    }
  for (DType dtype : dtypes)
    for (int64_t n : {0, 1, 3, 5001, 300001}) {
      check_reduce_scatter(world, stream, device, dtype, n,
                           n == 5001 ? ReduceOp::avg
                           : n == 3  ? ReduceOp::max
                                     : ReduceOp::sum);
      check_allgather(world, stream, device, dtype, n);
    }
  for (int root = 0; root < size; ++root)
    for (int64_t n : {1, 1000, 600001}) check_broadcast(world, stream, DType::f32, n, root);
  check_broadcast(world, stream, DType::bf16, 333, size - 1);
  check_point_to_point(world, stream, device);
  check_empty_messages_keep_order(world, stream, device);
  check_blocking_point_to_point(world, stream, device);
  check_unexpected_parts(world, stream, device);
  check_progress_without_a_waiter(world, stream, device);
  world.barrier();

  // Sub-communicators: even and odd ranks, ordered backwards by key.
  Communicator half = world.split(world.rank() % 2, -world.rank());
  std::vector<int> members;
  for (int r = size - 1; r >= 0; --r)
    if (r % 2 == world.rank() % 2) members.push_back(r);
  expect(half.size() == static_cast<int>(members.size()), "split size");
  bool order = true;
  for (int i = 0; i < half.size(); ++i) order = order && half.world_rank(i) == members[static_cast<size_t>(i)];
  expect(order, "split order by key");
  Tensor t = Tensor::from_host(stream, std::vector<double>(100001, world.rank()), {100001}, DType::f32);
  half.allreduce(stream, t, ReduceOp::sum);
  double want = 0;
  for (int r : members) want += r;
  const auto got = t.to_host(stream);
  expect(got.front() == want && got.back() == want, "allreduce on a split communicator");
  if (half.size() > 1) check_point_to_point(half, stream, device);
  Communicator none = world.split(world.rank() == 0 ? -1 : 0, 0);
  expect(none.valid() == (world.rank() != 0), "split with a negative colour leaves the rank out");
  world.barrier();
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  try {
    const auto info = h2::dicomm::rank_info_from_environment();
    prefix = "rank " + std::to_string(info.rank) + ": ";
    if (mode == "token" && info.rank == 1) setenv("H2_JOB_TOKEN", "not-the-job-token", 1);
    h2::Runtime runtime(h2::dicomm::runtime_options_for_device());
    const h2::Device device = h2::dicomm::select_device(runtime, info);
    h2::Stream stream = device.create_stream();
    if (mode == "stall" && info.rank == info.world_size - 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    if (mode == "caught") {  // every rank leaves DiComm through an exception it catches: a clean close
      try {
        Communicator world = Communicator::world();
        world.barrier();
        throw std::runtime_error("every rank throws on purpose");
      } catch (const std::runtime_error& e) {
        std::cout << prefix << "caught: " << e.what() << std::endl;
        return 0;
      }
    }
    Communicator world = Communicator::world();
    std::cout << prefix << "device " << device.label() << ", provider " << world.provider() << ", transport "
              << world.transport() << std::endl;
    if (mode == "check") {
      const int failed = run_checks(world, stream, device);
      std::cout << prefix << checks - failed << " of " << checks << " checks passed" << std::endl;
      return failed == 0 ? 0 : 1;
    }
    if (mode == "throw") {  // rank 0 leaves through an exception while the others wait for its split key
      if (info.rank == 0) throw std::runtime_error("rank 0 throws on purpose");
      world.split(0, info.rank);
      std::cout << prefix << "split without rank 0" << std::endl;
      return 1;
    }
    if (mode == "order") {  // the ordering check alone, for repeating it
      check_empty_messages_keep_order(world, stream, device);
      std::cout << prefix << checks - failures << " of " << checks << " checks passed" << std::endl;
      return failures == 0 ? 0 : 1;
    }
    if (mode == "sizes") {
      // Rank 1 receives each message into a tensor of another size: shorter, shorter and cut into
      // parts (with H2_DICOMM_FABRIC_MESSAGE_BYTES=4096), longer and cut (only then: uncut, it is
      // one more truncation), longer. A truncation comes last: after one, providers lose messages
      // that follow (shm hangs a sender whose large message was truncated; rxm drops some). After
      // the longer cut message, rank 1 receives once more on its tag: its second half is left there.
      const bool cut = std::getenv("H2_DICOMM_FABRIC_MESSAGE_BYTES") != nullptr;
      std::vector<std::pair<int64_t, int64_t>> sent_and_received{{1000, 2000}, {4096, 8192}};
      if (cut) sent_and_received.emplace_back(4096, 2048);
      sent_and_received.emplace_back(1000, 500);
      auto receive = [&](int64_t length, uint32_t tag, const std::string& which) {
        try {
          world.recv(stream, Tensor::empty(device, {length}, DType::f32), 0, tag);
          std::cout << prefix << which << length << " floats received" << std::endl;
        } catch (const h2::dicomm::CommError& e) {
          std::cout << prefix << which << "CommError(peer " << e.peer() << "): " << e.what() << std::endl;
        }
      };
      for (uint32_t tag = 0; tag < sent_and_received.size(); ++tag) {
        const auto [sent, received] = sent_and_received[tag];
        if (info.rank == 0) {
          try {
            world.send(stream, Tensor::from_host(stream, values(0, sent), {sent}, DType::f32), 1, tag);
          } catch (const h2::dicomm::CommError& e) {  // the node transport fails a truncated send too
            std::cout << prefix << "CommError(peer " << e.peer() << "): " << e.what() << std::endl;
          }
        } else if (info.rank == 1) {
          receive(received, tag, "");
          const bool longer_and_cut = cut && sent > received && sent * 4 > 4096;
          if (longer_and_cut) receive(received, tag, "the receive after it: ");
        }
      }
      return 0;
    }
    Tensor t = Tensor::from_host(stream, std::vector<double>(1 << 20, 1.0), {1 << 20}, DType::f32);
    world.allreduce(stream, t);  // everyone is connected and alive
    if (mode == "kill" && info.rank == info.world_size - 1) raise(SIGKILL);
    if (mode == "stop" && info.rank == info.world_size - 1) raise(SIGSTOP);
    if (mode == "hang" && info.rank == info.world_size - 1)
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));  // as a deadlock in its own code
    if (mode == "abort" && info.rank == 0) {
      world.abort("the test aborts on purpose");
      return 3;
    }
    try {
      for (int i = 0; i < 1000; ++i) world.allreduce(stream, t);
    } catch (const h2::dicomm::CommError& e) {
      // As h2 train does: what only this rank saw (a timeout) is told to the others.
      if (e.kind() == h2::dicomm::CommErrorKind::timeout) world.abort(e.what());
      throw;
    }
    std::cout << prefix << "no failure seen" << std::endl;
    return 1;
  } catch (const h2::dicomm::CommError& e) {
    std::cout << prefix << "CommError(peer " << e.peer() << "): " << e.what() << std::endl;
    return 3;
  } catch (const std::exception& e) {
    std::cout << prefix << "error: " << e.what() << std::endl;
    return 4;
  }
}
