// The collective section of the ABI (1.5) through the core's PluginComm, on the plugin under test:
// cpu-reference's shared memory library, the Ascend plugin's HCCL over the emulated CANN, or the MLU
// plugin's CNCL over the emulated Neuware (both emulated libraries run on the same shared memory). Ranks are processes
// forked before any of them loads the plugin (plugin threads do not survive fork); rank 0 makes the unique id and hands
// it to the others through pipes. Every rank reports what failed on stderr and in its exit code; the test bounds every
// rank's time.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "h2/h2.hpp"
#include "h2/half.hpp"
#include "h2/plugin_comm.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using namespace std::chrono_literals;

// What one rank does once it has its device and the id; returns its exit code (0: passed).
using RankBody = std::function<int(int rank, int ranks, const Device& device, const H2_CommUniqueId& id)>;

// Exit code 3 (and a message) for a check that failed.
#define RANK_EXPECT(condition)                                                                     \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      std::fprintf(stderr, "rank %d: %s:%d: expected %s\n", rank, __FILE__, __LINE__, #condition); \
      return 3;                                                                                    \
    }                                                                                              \
  } while (0)

// Exit code 3 (and the message) when `text` does not contain `words`.
#define RANK_EXPECT_CONTAINS(text, words)                                                                            \
  do {                                                                                                               \
    const std::string said = (text);                                                                                 \
    if (said.find(words) == std::string::npos) {                                                                     \
      std::fprintf(stderr, "rank %d: %s:%d: expected '%s' in: %s\n", rank, __FILE__, __LINE__, words, said.c_str()); \
      return 3;                                                                                                      \
    }                                                                                                                \
  } while (0)

// Runs `ranks` processes of `body`; returns each one's exit code (-signal when killed).
std::vector<int> run_ranks(int ranks, const RankBody& body, std::chrono::seconds limit = 60s) {
  std::vector<std::array<int, 2>> pipes(static_cast<size_t>(ranks));
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) throw std::runtime_error("pipe failed");
  std::vector<pid_t> children;
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
      int code = 0;
      try {
        Runtime runtime(test::plugin_under_test_only());
        Device device = runtime.device(test::plugin_under_test(), 0);
        H2_CommUniqueId id{};
        if (rank == 0) {
          id = PluginComm::unique_id(device);
          for (int r = 1; r < ranks; ++r)
            if (write(pipes[static_cast<size_t>(r)][1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(20);
        } else {
          pollfd ready{pipes[static_cast<size_t>(rank)][0], POLLIN, 0};
          if (poll(&ready, 1, 30'000) != 1 ||
              read(pipes[static_cast<size_t>(rank)][0], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
            _exit(21);
        }
        code = body(rank, ranks, device, id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 22;
      }
      std::fflush(stderr);
      _exit(code);
    }
    children.push_back(child);
  }
  std::vector<int> codes(static_cast<size_t>(ranks), -1000);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  size_t left = children.size();
  while (left > 0) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (codes[i] != -1000) continue;
      int status = 0;
      if (waitpid(children[i], &status, WNOHANG) == children[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < children.size(); ++i)
        if (codes[i] == -1000) kill(children[i], SIGKILL);
    }
    std::this_thread::sleep_for(5ms);
  }
  for (auto& p : pipes) {
    close(p[0]);
    close(p[1]);
  }
  return codes;
}

// The error the stream's work ended with, or "" when it succeeded.
std::string stream_error(Stream& stream) {
  try {
    stream.synchronize();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_all_passed(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " (see its messages above)";
}

Tensor filled(Stream& stream, const Device& device, DType dtype, int64_t n, const std::function<double(int64_t)>& f) {
  Tensor t = Tensor::empty(device, {n}, dtype);
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = f(i);
  t.copy_from_host(stream, values);
  return t;
}

// Larger than a step of the shared-memory library (1 MiB) and than a point-to-point chunk, so that
// every call runs several steps.
constexpr int64_t kCount = 300'001;

// What the library of the plugin under test is, and where it differs from the ABI's best case.
struct LibraryFacts {
  std::string name;
  CommScope scope;
  size_t id_bytes;
  std::string abort_seen_by_others;  // what another rank's failure says after rank 1 aborts (HCCL: none)
  std::string join_timeout;          // what a join that times out says
};

LibraryFacts library_facts() {
  const std::string plugin = test::plugin_under_test();
  // HCCL cannot abort another rank and, as CNCL, does not say which ranks a join misses; CNCL's abort
  // carries no reason.
  if (plugin == "ascend")
    return {"HCCL (emulated)", CommScope::network, 4108, "",
            "not all 3 ranks joined the HCCL communicator within 300 ms"};
  if (plugin == "mlu")
    return {"CNCL 1.25.0 (emulated)", CommScope::network, 136, "aborted by rank 1: cnclAbortComm on rank 1",
            "not all 3 ranks joined the CNCL communicator within 300 ms"};
  return {"cpu-reference shared memory", CommScope::node, 88, "aborted by rank 1: the test gave up",
          "waiting for ranks 1, 2 to join"};
}

// Whether the library's own join goes on after the plugin gave up (until the timeout set below).
bool join_outlives_the_plugin() {
  return test::plugin_under_test() != "cpu-reference";
}

TEST(PluginComm, ThePluginOffersItsLibrary) {
  const std::vector<int> codes = run_ranks(1, [](int rank, int, const Device& device, const H2_CommUniqueId&) {
    const auto library = PluginComm::library(device);
    const LibraryFacts facts = library_facts();
    RANK_EXPECT(library.has_value());
    RANK_EXPECT(library->name == facts.name);
    RANK_EXPECT(library->scope == facts.scope);
    RANK_EXPECT(library->unique_id_bytes == facts.id_bytes);  // HCCL's 4,108: the largest the ABI carries
    return 0;
  });
  expect_all_passed(codes);
}

// Every collective on four ranks against the values they must give, in f32 and bf16, in place and not.
TEST(PluginComm, EveryCollectiveGivesTheReductionOnFourRanks) {
  const std::vector<int> codes = run_ranks(4, [](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, ranks, rank, 30s);
    Stream stream = device.create_stream();
    const auto value = [&](int r, int64_t i) { return static_cast<double>((i * 7 + r * 13) % 101); };
    int64_t sum_all = 0;
    for (DType dtype : {DType::f32, DType::bf16}) {
      Tensor x = filled(stream, device, dtype, kCount, [&](int64_t i) { return value(rank, i); });
      Tensor sum = Tensor::empty(device, {kCount}, dtype);
      comm.allreduce(stream, x, sum, H2_REDUCE_SUM);
      Tensor top = Tensor::empty(device, {kCount}, dtype);
      comm.allreduce(stream, x, top, H2_REDUCE_MAX);
      comm.allreduce(stream, x, x, H2_REDUCE_MEAN);  // in place
      const std::vector<double> s = sum.to_host(stream), m = top.to_host(stream), mean = x.to_host(stream);
      for (int64_t i = 0; i < kCount; ++i) {
        double expected = 0, largest = 0;
        for (int r = 0; r < ranks; ++r) {
          expected += value(r, i);
          largest = std::max(largest, value(r, i));
        }
        // Whole numbers: the f32 sum is exact, then rounded once into the dtype.
        const double rounded = dtype == DType::f32 ? expected : bf16_to_f32(f32_to_bf16(static_cast<float>(expected)));
        RANK_EXPECT(s[static_cast<size_t>(i)] == rounded);
        RANK_EXPECT(m[static_cast<size_t>(i)] == largest);
        // One rounding of the f32 mean into the dtype (HCCL and CNCL, which have no average, divide
        // first, exactly here for these values, and round the sum once).
        RANK_EXPECT(std::abs(mean[static_cast<size_t>(i)] - expected / ranks) <= (dtype == DType::f32 ? 1e-5 : 0.25));
        sum_all += 1;
      }
    }
    // reduce_scatter: block r of the sum lands on rank r.
    Tensor blocks = filled(stream, device, DType::f32, kCount * ranks, [&](int64_t i) { return value(rank, i); });
    Tensor mine = Tensor::empty(device, {kCount}, DType::f32);
    comm.reduce_scatter(stream, blocks, mine, H2_REDUCE_SUM);
    // allgather: every rank's block, in rank order, into a buffer holding this rank's block in place.
    Tensor gathered = filled(stream, device, DType::f32, kCount * ranks, [](int64_t) { return -1.0; });
    Tensor own = gathered.slice(0, kCount * rank, kCount * (rank + 1));
    own.copy_from_host(stream, std::vector<double>(static_cast<size_t>(kCount), rank + 0.5));
    comm.allgather(stream, own, gathered);
    // broadcast from rank 2.
    Tensor cast = filled(stream, device, DType::f32, kCount, [&](int64_t i) { return rank == 2 ? value(9, i) : -7.0; });
    comm.broadcast(stream, cast, cast, 2);
    const std::vector<double> r = mine.to_host(stream), g = gathered.to_host(stream), b = cast.to_host(stream);
    for (int64_t i = 0; i < kCount; ++i) {
      double expected = 0;
      for (int q = 0; q < ranks; ++q) expected += value(q, kCount * rank + i);
      RANK_EXPECT(r[static_cast<size_t>(i)] == expected);
      RANK_EXPECT(b[static_cast<size_t>(i)] == value(9, i));
      for (int q = 0; q < ranks; ++q) RANK_EXPECT(g[static_cast<size_t>(kCount * q + i)] == q + 0.5);
    }
    stream.synchronize();
    RANK_EXPECT(sum_all == 2 * kCount);
    return 0;
  });
  expect_all_passed(codes);
}

// The cpu-reference arenas this process maps: its own device's, and those of the peers whose memory
// its collective library opened to work in place (each a memfd, told apart by its inode).
size_t arenas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> inodes;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:h2-cpu-reference-dev") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    fields >> range >> perms >> offset >> device >> inode;
    inodes.insert(inode);
  }
  return inodes.size();
}

// cpu-reference's library reads the other ranks' device memory in place from 64 KiB, and copies
// through its segment when told never to (H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE=off).
TEST(PluginComm, CpuReferencesLibraryMapsItsPeersMemoryToWorkInPlace) {
  if (test::plugin_under_test() != "cpu-reference") GTEST_SKIP() << "cpu-reference's library only";
  for (const bool in_place : {true, false}) {
    SCOPED_TRACE(in_place ? "in place" : "through the segment");
    test::ScopedEnv setting("H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", in_place ? "64KiB" : "off");
    expect_all_passed(run_ranks(4, [&](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
      PluginComm comm(device, id, ranks, rank, 30s);
      Stream stream = device.create_stream();
      Tensor x =
          filled(stream, device, DType::f32, kCount, [&](int64_t i) { return static_cast<double>(i % 7 + rank); });
      RANK_EXPECT(arenas_mapped() == 1);
      comm.allreduce(stream, x, x, H2_REDUCE_SUM);
      const std::vector<double> sum = x.to_host(stream);
      for (int64_t i = 0; i < kCount; ++i) RANK_EXPECT(sum[static_cast<size_t>(i)] == 4.0 * (i % 7) + 6);
      RANK_EXPECT(arenas_mapped() == (in_place ? 4u : 1u));
      return 0;
    }));
  }
}

// A ring exchange of messages larger than a channel chunk: each rank sends right and receives from
// the left in one group, which would wait forever issued one after the other.
TEST(PluginComm, GroupedSendAndReceiveRunTogether) {
  const std::vector<int> codes = run_ranks(3, [](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, ranks, rank, 30s);
    Stream stream = device.create_stream();
    Tensor out = filled(stream, device, DType::f32, kCount, [&](int64_t i) { return rank * 1000.0 + i % 977; });
    Tensor in = Tensor::empty(device, {kCount}, DType::f32);
    const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
    comm.group_start();
    comm.send(stream, out, right);
    comm.recv(stream, in, left);
    comm.group_end();
    const std::vector<double> got = in.to_host(stream);
    for (int64_t i = 0; i < kCount; ++i) RANK_EXPECT(got[static_cast<size_t>(i)] == left * 1000.0 + i % 977);
    return 0;
  });
  expect_all_passed(codes);
}

// Several messages to one peer arrive in the order sent, an empty one among them, each whole.
TEST(PluginComm, MessagesToOnePeerArriveInOrderEmptyOnesToo) {
  const std::vector<int> codes = run_ranks(2, [](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, ranks, rank, 30s);
    Stream stream = device.create_stream();
    const std::vector<int64_t> sizes = {1000, 0, kCount, 7};
    std::vector<Tensor> messages;
    for (size_t k = 0; k < sizes.size(); ++k)
      messages.push_back(rank == 0
                             ? filled(stream, device, DType::f32, sizes[k], [&](int64_t i) { return k * 1e6 + i; })
                             : Tensor::empty(device, {sizes[k]}, DType::f32));
    comm.group_start();
    for (const Tensor& message : messages) {
      if (rank == 0) comm.send(stream, message, 1);
      if (rank == 1) comm.recv(stream, message, 0);
    }
    comm.group_end();
    if (rank == 1)
      for (size_t k = 0; k < sizes.size(); ++k) {
        const std::vector<double> got = messages[k].to_host(stream);
        RANK_EXPECT(static_cast<int64_t>(got.size()) == sizes[k]);
        for (int64_t i = 0; i < sizes[k]; ++i) RANK_EXPECT(got[static_cast<size_t>(i)] == k * 1e6 + i);
      }
    stream.synchronize();
    return 0;
  });
  expect_all_passed(codes);
}

// A rank that exits without taking part: the others' allreduce fails on their stream naming it,
// well before the communicator's timeout.
TEST(PluginComm, ARankThatExitsFailsTheOthersNamingIt) {
  const std::vector<int> codes = run_ranks(3, [](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, ranks, rank, 60s);
    if (rank == 2) _exit(0);
    Stream stream = device.create_stream();
    Tensor x = filled(stream, device, DType::f32, 1000, [](int64_t) { return 1.0; });
    const auto start = std::chrono::steady_clock::now();
    comm.allreduce(stream, x, x, H2_REDUCE_SUM);  // enqueued: the failure comes with the stream
    const std::string message = stream_error(stream);
    RANK_EXPECT(!message.empty());  // the allreduce must not succeed without rank 2
    RANK_EXPECT_CONTAINS(message, "rank 2 (process ");
    RANK_EXPECT_CONTAINS(message, "has exited");
    RANK_EXPECT(std::chrono::steady_clock::now() - start < 20s);
    return 0;
  });
  expect_all_passed(codes);
}

// comm_abort on one rank fails the other's pending collective, naming the rank and the reason
// (CNCL's abort carries none). HCCL cannot abort another rank.
TEST(PluginComm, AnAbortReachesEveryRank) {
  if (test::plugin_under_test() == "ascend")
    GTEST_SKIP() << "HCCL has no abort: an aborting rank fails only its own later work";
  const std::vector<int> codes = run_ranks(2, [](int rank, int ranks, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, ranks, rank, 60s);
    if (rank == 1) {
      comm.abort("the test gave up");
      std::this_thread::sleep_for(500ms);  // stay alive: the failure must come from the abort
      return 0;
    }
    Stream stream = device.create_stream();
    Tensor x = filled(stream, device, DType::f32, 1000, [](int64_t) { return 1.0; });
    comm.allreduce(stream, x, x, H2_REDUCE_SUM);
    RANK_EXPECT_CONTAINS(stream_error(stream), library_facts().abort_seen_by_others.c_str());
    return 0;
  });
  expect_all_passed(codes);
}

// Work issued after an abort fails too, also where nothing would have to wait (one rank).
TEST(PluginComm, WorkIssuedAfterAnAbortFails) {
  const std::vector<int> codes = run_ranks(1, [](int rank, int, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, 1, 0, 10s);
    Stream stream = device.create_stream();
    Tensor x = filled(stream, device, DType::f32, 10, [](int64_t) { return 1.0; });
    comm.abort("given up before the allreduce");
    // Refused at the call (the ABI allows it for an aborted communicator) or on the stream.
    std::string failure;
    try {
      comm.allreduce(stream, x, x, H2_REDUCE_SUM);
      failure = stream_error(stream);
    } catch (const Error& e) {
      failure = e.what();
    }
    RANK_EXPECT_CONTAINS(failure, "aborted");
    RANK_EXPECT_CONTAINS(failure, "given up before the allreduce");
    return 0;
  });
  expect_all_passed(codes);
}

// Joining a communicator whose other ranks never come ends at the timeout, naming them.
TEST(PluginComm, JoiningTimesOutNamingTheRanksMissing) {
  const std::vector<int> codes = run_ranks(1, [](int rank, int, const Device& device, const H2_CommUniqueId& id) {
    setenv("HCCL_CONNECT_TIMEOUT", "1", 1);       // HCCL's own limit on joining, in seconds
    setenv("MLU_EMULATOR_CNCL_TIMEOUT", "1", 1);  // the emulated CNCL's
    const auto start = std::chrono::steady_clock::now();
    try {
      PluginComm comm(device, id, 3, rank, 300ms);
    } catch (const Error& e) {
      RANK_EXPECT_CONTAINS(std::string(e.what()), library_facts().join_timeout.c_str());
      RANK_EXPECT(std::chrono::steady_clock::now() - start < 10s);
      // The library's own join goes on to its timeout (1 s here), then removes its segment.
      if (join_outlives_the_plugin()) std::this_thread::sleep_for(1500ms);
      return 0;
    }
    RANK_EXPECT(!"a 3-rank communicator formed with one rank");
    return 0;
  });
  expect_all_passed(codes);
}

// What the library cannot do is refused when called, naming it, and nothing is enqueued.
TEST(PluginComm, CallsItCannotRunAreRefusedAtOnce) {
  const std::vector<int> codes = run_ranks(1, [](int rank, int, const Device& device, const H2_CommUniqueId& id) {
    PluginComm comm(device, id, 1, 0, 10s);
    Stream stream = device.create_stream();
    Tensor i32 = filled(stream, device, DType::i32, 10, [](int64_t i) { return static_cast<double>(i); });
    Tensor f32 = filled(stream, device, DType::f32, 10, [](int64_t) { return 1.0; });
    Tensor short_f32 = Tensor::empty(device, {9}, DType::f32);
    const auto refused = [&](const std::function<void()>& call, const char* words) {
      try {
        call();
      } catch (const Error& e) {
        return std::string(e.what()).find(words) != std::string::npos;
      }
      return false;
    };
    RANK_EXPECT(refused([&] { comm.allreduce(stream, i32, i32, H2_REDUCE_MEAN); }, "no MEAN of integers"));
    RANK_EXPECT(refused([&] { comm.allreduce(stream, f32, short_f32, H2_REDUCE_SUM); }, "must have the elements"));
    RANK_EXPECT(refused([&] { comm.send(stream, f32, 0); }, "peer 0 of rank 0"));
    comm.allreduce(stream, f32, f32, H2_REDUCE_SUM);  // one rank: the sum is itself
    const std::vector<double> got = f32.to_host(stream);
    RANK_EXPECT(got[3] == 1.0);
    return 0;
  });
  expect_all_passed(codes);
}

}  // namespace
}  // namespace h2
