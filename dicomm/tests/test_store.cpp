// The rendezvous store across real processes: every rank is a fork()ed child talking TCP on
// loopback to the store that its rank 0 runs. A child reports through its exit status (and prints
// what went wrong); the parent bounds every child's time and kills what overruns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "h2/dicomm/store.hpp"
#include "h2/error.hpp"
#include "store/missing_ranks.hpp"
#include "store/store_protocol.hpp"  // kHelloDeadline, kMaxUnwelcomed: the limits the store keeps

namespace h2::dicomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kTimeout = 5000ms;
// A child that has not finished by then is stuck: the parent kills it and fails the test.
constexpr std::chrono::seconds kChildLimit{20};

#define CHILD_CHECK(cond)                                                                                 \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      std::fprintf(stderr, "%s:%d: check failed in pid %d: %s\n", __FILE__, __LINE__, ::getpid(), #cond); \
      return 1;                                                                                           \
    }                                                                                                     \
  } while (0)

#define CHILD_CHECK_MSG(cond, text)                                                                           \
  do {                                                                                                        \
    if (!(cond)) {                                                                                            \
      std::fprintf(stderr, "%s:%d: check failed in pid %d: %s (%s)\n", __FILE__, __LINE__, ::getpid(), #cond, \
                   std::string(text).c_str());                                                                \
      return 1;                                                                                               \
    }                                                                                                         \
  } while (0)

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Collects what the failure handler is given. The handler shares the state, so a body that returns
// early (a failed check) does not leave the store's thread writing into a dead object.
class Failures {
 public:
  std::function<void(const RankFailure&)> handler() {
    return [state = state_](const RankFailure& f) {
      std::lock_guard lock(state->mutex);
      state->seen.push_back(f);
      state->cv.notify_all();
    };
  }
  std::optional<RankFailure> wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(state_->mutex);
    state_->cv.wait_for(lock, limit, [&] { return !state_->seen.empty(); });
    if (state_->seen.empty()) return std::nullopt;
    return state_->seen.front();
  }
  size_t count() {
    std::lock_guard lock(state_->mutex);
    return state_->seen.size();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<RankFailure> seen;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

RankInfo rank_info(int rank, int world_size, int port, std::string token = "job-token") {
  RankInfo info;
  info.rank = rank;
  info.world_size = world_size;
  info.local_rank = rank;
  info.local_world_size = world_size;
  info.master_addr = "127.0.0.1";
  info.master_port = port;
  info.token = std::move(token);
  info.source = LaunchSource::h2;
  return info;
}

// The message of the h2::Error that `body` throws, or "" (and a failure printed) when it does not.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  std::fprintf(stderr, "expected an h2::Error\n");
  return "";
}

pid_t spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pid %d failed: %s\n", ::getpid(), e.what());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return pid;
}

// Rank 0 runs in a child too (so that it can die); it reports the store's port through a pipe.
struct Job {
  std::vector<pid_t> pids;
  int port = 0;
};

Job start_rank0(int world_size, const std::function<int(Store&)>& body, std::string token = "job-token",
                std::chrono::milliseconds timeout = kTimeout) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = spawn([&]() -> int {
    ::close(fds[0]);
    auto store = Store::connect(rank_info(0, world_size, 0, token), timeout);
    int port = std::stoi(store->address().substr(store->address().rfind(':') + 1));
    if (::write(fds[1], &port, sizeof(port)) != sizeof(port)) return 1;
    ::close(fds[1]);
    return body(*store);
  });
  ::close(fds[1]);
  Job job;
  job.pids.push_back(pid);
  pollfd pfd{fds[0], POLLIN, 0};
  if (::poll(&pfd, 1, 10'000) == 1 && ::read(fds[0], &job.port, sizeof(job.port)) != sizeof(job.port)) job.port = 0;
  ::close(fds[0]);
  return job;
}

void start_rank(Job& job, int rank, int world_size, const std::function<int(Store&)>& body,
                std::chrono::milliseconds timeout = kTimeout) {
  int port = job.port;
  job.pids.push_back(spawn([&]() -> int {
    auto store = Store::connect(rank_info(rank, world_size, port), timeout);
    return body(*store);
  }));
}

// Exit codes of every child (-signal for a killed one); kills them all once `limit` has passed.
std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds limit = kChildLimit) {
  Clock::time_point deadline = Clock::now() + limit;
  std::vector<int> codes(pids.size(), 1000);
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    if (left == 0) break;
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          ADD_FAILURE() << "child " << i << " (pid " << pids[i] << ") overran " << limit.count() << " s; killed";
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
        }
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  return codes;
}

void expect_all_succeeded(const std::vector<int>& codes) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "child " << i;
}

TEST(Store, FourRanksSetGetAddBarrier) {
  constexpr int kWorld = 4;
  auto body = [](int rank) {
    return [rank](Store& store) -> int {
      Failures failures;
      store.on_failure(failures.handler());
      CHILD_CHECK(store.rank() == rank);
      CHILD_CHECK(store.world_size() == kWorld);
      CHILD_CHECK(store.local_address() == "127.0.0.1");
      CHILD_CHECK(store.address().starts_with("127.0.0.1:"));

      store.set("key/" + std::to_string(rank), "value " + std::to_string(rank));
      store.add("counter", 1);
      // Several threads of one rank share the store.
      std::atomic<int> thread_errors{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&store, &thread_errors, rank, t] {
          try {
            for (int i = 0; i < 25; ++i) {
              store.add("threaded", 1);
              std::string key = "t/" + std::to_string(rank) + "/" + std::to_string(t) + "/" + std::to_string(i);
              store.set(key, key);
              if (store.get(key) != key) ++thread_errors;
            }
          } catch (const std::exception& e) {
            std::fprintf(stderr, "thread: %s\n", e.what());
            ++thread_errors;
          }
        });
      for (auto& t : threads) t.join();
      CHILD_CHECK(thread_errors == 0);
      store.barrier("after-set");

      for (int r = 0; r < kWorld; ++r)
        CHILD_CHECK(store.get("key/" + std::to_string(r)) == "value " + std::to_string(r));
      CHILD_CHECK(store.get("counter") == "4");
      CHILD_CHECK(store.get("threaded") == "400");
      CHILD_CHECK(store.add("counter", 0) == 4);
      CHILD_CHECK(store.add("negative/" + std::to_string(rank), -5) == -5);

      // get blocks until another rank sets the key.
      if (rank == 3) {
        std::this_thread::sleep_for(300ms);
        store.set("late", "here");
      } else {
        Clock::time_point start = Clock::now();
        CHILD_CHECK(store.get("late") == "here");
        CHILD_CHECK_MSG(ms_since(start) >= 200, std::to_string(ms_since(start)) + " ms");
      }
      // A barrier name can be used again once every rank has passed it.
      store.barrier("again");
      store.barrier("again");
      Clock::time_point start = Clock::now();
      store.close();
      CHILD_CHECK_MSG(ms_since(start) < 1500, std::to_string(ms_since(start)) + " ms");
      CHILD_CHECK(failures.count() == 0);
      CHILD_CHECK(error_of([&] { store.get("key/0"); }).find("after close()") != std::string::npos);
      return 0;
    };
  };
  Clock::time_point start = Clock::now();
  Job job = start_rank0(kWorld, body(0));
  ASSERT_NE(job.port, 0);
  for (int r = 1; r < kWorld; ++r) start_rank(job, r, kWorld, body(r));
  expect_all_succeeded(wait_all(job.pids));
  EXPECT_LT(ms_since(start), 10'000);
}

TEST(Store, WrongTokenIsRefusedAndTheStoreKeepsServing) {
  Job job = start_rank0(2, [](Store& store) -> int {
    Failures failures;
    store.on_failure(failures.handler());
    store.barrier("joined");
    store.close();
    CHILD_CHECK(failures.count() == 0);  // a refused connection is no rank failure
    return 0;
  });
  ASSERT_NE(job.port, 0);
  int port = job.port;
  job.pids.push_back(spawn([port]() -> int {
    Clock::time_point start = Clock::now();
    std::string message = error_of([&] { Store::connect(rank_info(1, 2, port, "wrong-token"), kTimeout); });
    std::string expected =
        "rendezvous store at 127.0.0.1:" + std::to_string(port) + " refused rank 1: wrong job token (H2_JOB_TOKEN)";
    CHILD_CHECK_MSG(message == expected, message);
    CHILD_CHECK_MSG(ms_since(start) < 2000, "a refusal is final, not retried until the timeout");
    try {
      Store::connect(rank_info(1, 2, port, "wrong-token"), kTimeout);
    } catch (const Error& e) {
      CHILD_CHECK(e.status() == H2_STATUS_INVALID_ARGUMENT);
    }
    auto store = Store::connect(rank_info(1, 2, port), kTimeout);
    store->barrier("joined");
    store->close();
    return 0;
  }));
  expect_all_succeeded(wait_all(job.pids));
}

TEST(Store, DuplicateRankOutOfRangeRankAndOtherWorldSizeAreRefused) {
  Job job = start_rank0(2, [](Store& store) -> int {
    Failures failures;
    store.on_failure(failures.handler());
    store.barrier("checked");
    store.close();
    CHILD_CHECK(failures.count() == 0);
    return 0;
  });
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, 2, [port = job.port](Store& store) -> int {
    std::string prefix = "rendezvous store at 127.0.0.1:" + std::to_string(port) + " refused rank ";
    std::string duplicate = error_of([&] { Store::connect(rank_info(1, 2, port), kTimeout); });
    CHILD_CHECK_MSG(duplicate.starts_with(prefix + "1: duplicate rank: rank 1 (pid " + std::to_string(::getpid())),
                    duplicate);
    CHILD_CHECK_MSG(duplicate.ends_with(") is already connected"), duplicate);
    std::string range = error_of([&] { Store::connect(rank_info(2, 2, port), kTimeout); });
    CHILD_CHECK_MSG(range == prefix + "2: rank 2 is not below the world size 2", range);
    std::string world = error_of([&] { Store::connect(rank_info(1, 3, port), kTimeout); });
    CHILD_CHECK_MSG(world == prefix + "1: its world size 3 differs from the store's world size 2", world);
    store.barrier("checked");
    store.close();
    return 0;
  });
  expect_all_succeeded(wait_all(job.pids));
}

// One rank in this process: the store's threads are joined before any later test forks.
TEST(Store, GetTimesOutNamingTheKey) {
  RankInfo info;  // a single process: rank 0 of 1, ephemeral port
  auto store = Store::connect(info, 300ms);
  store->set("present", "yes");
  EXPECT_EQ(store->get("present"), "yes");
  store->barrier("alone");  // a world of one passes at once
  Clock::time_point start = Clock::now();
  try {
    store->get("never-set");
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("get('never-set')"));
    EXPECT_THAT(e.what(), HasSubstr("timed out after 300 ms waiting for key 'never-set' to be set"));
  }
  EXPECT_GE(ms_since(start), 250);
  EXPECT_LT(ms_since(start), 2500);
  // The store still serves after a timeout.
  EXPECT_EQ(store->add("n", 2), 2);
  EXPECT_THAT(error_of([&] { store->add("present", 1); }), HasSubstr("key 'present' holds 'yes', not an integer"));
  start = Clock::now();
  store->close();
  EXPECT_LT(ms_since(start), 1000);
}

TEST(Store, ConnectGivesUpAfterTheTimeoutNamingTheAddress) {
  // A port that nothing listens on: bind one, then let it go.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  int port = ntohs(address.sin_port);
  ::close(fd);

  Clock::time_point start = Clock::now();
  std::string message = error_of([&] { Store::connect(rank_info(1, 2, port), 400ms); });
  EXPECT_THAT(message, HasSubstr("could not connect to the rendezvous store at 127.0.0.1:" + std::to_string(port) +
                                 " within 400 ms"));
  EXPECT_THAT(message, HasSubstr("Connection refused"));
  EXPECT_GE(ms_since(start), 350);
  EXPECT_LT(ms_since(start), 3000);
}

TEST(Store, ARankThatExitsWithoutClosingIsReportedToTheOthers) {
  constexpr int kWorld = 3;
  auto survivor = [](int rank) {
    return [rank](Store& store) -> int {
      Failures failures;
      if (rank == 0) store.on_failure(failures.handler());
      store.barrier("ready");
      Clock::time_point start = Clock::now();
      // A barrier that the dead rank can never reach fails instead of waiting for the timeout.
      std::string message = error_of([&] { store.barrier("never"); });
      CHILD_CHECK_MSG(message.find("barrier 'never' cannot complete: rank 2 failed") != std::string::npos, message);
      CHILD_CHECK_MSG(ms_since(start) < 3000, std::to_string(ms_since(start)) + " ms");
      if (rank == 0) {
        auto failure = failures.wait(3000ms);
        CHILD_CHECK(failure.has_value());
        CHILD_CHECK(failure->rank == 2);
        CHILD_CHECK_MSG(failure->reason.find("exited without closing DiComm") != std::string::npos, failure->reason);
      } else {
        // A key nobody has set is refused at once: after a failure the job is over, and nobody may
        // ever set it (a rank that waited in a split for the dead rank's choice waited out its timeout).
        start = Clock::now();
        message = error_of([&] { store.get("never-set"); });
        CHILD_CHECK_MSG(message.find("key 'never-set' is not set and rank 2 failed (the process") != std::string::npos,
                        message);
        CHILD_CHECK_MSG(ms_since(start) < 3000, std::to_string(ms_since(start)) + " ms");
        // A handler installed after the failure is run at once with it (the failure's notice came
        // before the barrier's answer, on the same connection).
        store.on_failure(failures.handler());
        auto failure = failures.wait(100ms);
        CHILD_CHECK(failure.has_value());
        CHILD_CHECK(failure->rank == 2);
      }
      std::this_thread::sleep_for(200ms);
      CHILD_CHECK(failures.count() == 1);  // once only
      Clock::time_point closing = Clock::now();
      store.close();
      CHILD_CHECK_MSG(ms_since(closing) < 2000, std::to_string(ms_since(closing)) + " ms");
      return 0;
    };
  };
  Job job = start_rank0(kWorld, survivor(0));
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, kWorld, survivor(1));
  start_rank(job, 2, kWorld, [](Store& store) -> int {
    store.barrier("ready");
    ::_exit(0);  // no close, no destructors: as if the process had crashed
  });
  expect_all_succeeded(wait_all(job.pids));
}

TEST(Store, AbortPropagatesTheReason) {
  constexpr int kWorld = 3;
  auto witness = [](Store& store) -> int {
    Failures failures;
    store.on_failure(failures.handler());
    store.barrier("ready");
    auto failure = failures.wait(3000ms);
    CHILD_CHECK(failure.has_value());
    CHILD_CHECK(failure->rank == 1);
    CHILD_CHECK_MSG(failure->reason == "aborted: loss is NaN", failure->reason);
    store.close();
    return 0;
  };
  Job job = start_rank0(kWorld, witness);
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, kWorld, [](Store& store) -> int {
    store.barrier("ready");
    store.abort("loss is NaN");
    return 0;  // the destructor after abort() closes without a goodbye
  });
  start_rank(job, 2, kWorld, witness);
  expect_all_succeeded(wait_all(job.pids));
}

TEST(Store, RankZeroDeathIsReportedToTheOthers) {
  constexpr int kWorld = 3;
  auto survivor = [](Store& store) -> int {
    Failures failures;
    store.on_failure(failures.handler());
    store.barrier("ready");
    Clock::time_point start = Clock::now();
    auto failure = failures.wait(3000ms);
    CHILD_CHECK(failure.has_value());
    CHILD_CHECK(failure->rank == 0);
    CHILD_CHECK_MSG(failure->reason.find("exited without closing DiComm") != std::string::npos, failure->reason);
    CHILD_CHECK_MSG(ms_since(start) < 2000, std::to_string(ms_since(start)) + " ms");
    // The store is gone: calls fail at once rather than wait for the timeout.
    start = Clock::now();
    std::string message = error_of([&] { store.get("anything"); });
    CHILD_CHECK_MSG(message.find("the connection to the rendezvous store") != std::string::npos, message);
    CHILD_CHECK(ms_since(start) < 1000);
    start = Clock::now();
    store.close();
    CHILD_CHECK_MSG(ms_since(start) < 1000, std::to_string(ms_since(start)) + " ms");
    return 0;
  };
  Job job = start_rank0(kWorld, [](Store& store) -> int {
    store.barrier("ready");
    ::_exit(0);
  });
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, kWorld, survivor);
  start_rank(job, 2, kWorld, survivor);
  expect_all_succeeded(wait_all(job.pids));
}

TEST(Store, CleanCloseIsFastAndReportsNothing) {
  constexpr int kWorld = 4;
  auto body = [](int rank) {
    return [rank](Store& store) -> int {
      Failures failures;
      store.on_failure(failures.handler());
      store.barrier("ready");
      if (rank == 3) return 0;  // the destructor closes: a clean exit, not a failure
      Clock::time_point start = Clock::now();
      store.close();
      CHILD_CHECK_MSG(ms_since(start) < 1000, std::to_string(ms_since(start)) + " ms");
      store.close();  // a second close does nothing
      CHILD_CHECK(failures.count() == 0);
      return 0;
    };
  };
  Clock::time_point start = Clock::now();
  Job job = start_rank0(kWorld, body(0));
  ASSERT_NE(job.port, 0);
  for (int r = 1; r < kWorld; ++r) start_rank(job, r, kWorld, body(r));
  expect_all_succeeded(wait_all(job.pids));
  EXPECT_LT(ms_since(start), 5000);
}

TEST(Store, RankZeroCloseIsBoundedByTheTimeout) {
  constexpr auto kShort = 800ms;
  Job job = start_rank0(
      2,
      [](Store& store) -> int {
        store.barrier("ready");
        Clock::time_point start = Clock::now();
        store.close();  // rank 1 does not close: wait for it no longer than the timeout
        CHILD_CHECK_MSG(ms_since(start) >= 600 && ms_since(start) < 2500, std::to_string(ms_since(start)) + " ms");
        return 0;
      },
      "job-token", kShort);
  ASSERT_NE(job.port, 0);
  start_rank(
      job, 1, 2,
      [](Store& store) -> int {
        Failures failures;
        store.on_failure(failures.handler());
        store.barrier("ready");
        auto failure = failures.wait(4000ms);
        CHILD_CHECK(failure.has_value());
        CHILD_CHECK(failure->rank == 0);
        CHILD_CHECK_MSG(failure->reason.find("rank 0 closed the rendezvous store after waiting") != std::string::npos,
                        failure->reason);
        store.close();
        return 0;
      },
      kShort);
  expect_all_succeeded(wait_all(job.pids));
}

// A stopped rank (SIGSTOP: alive, connection open, silent) used to be found only by the operations
// waiting on it, after their whole timeout, and named by whichever peer timed out first. The store
// hears each rank's heartbeat and fails a silent one within 90% of the timeout, naming it; a stopped
// rank 0 (whose process runs the store) is reported by the ranks that stop hearing from the store.
TEST(Store, AStoppedRankIsNamedWithinTheTimeout) {
  constexpr int kWorld = 3;
  constexpr std::chrono::milliseconds kShort = 2000ms;
  auto witness = [&](int stopped) {
    return [stopped, kShort](Store& store) -> int {
      Failures failures;
      store.on_failure(failures.handler());
      store.barrier("ready");
      const Clock::time_point start = Clock::now();
      auto failure = failures.wait(kShort * 3);
      CHILD_CHECK(failure.has_value());
      CHILD_CHECK_MSG(failure->rank == stopped, failure->reason);
      CHILD_CHECK_MSG(failure->reason.find("stopped responding") != std::string::npos, failure->reason);
      CHILD_CHECK_MSG(ms_since(start) <= kShort.count() * 11 / 10, std::to_string(ms_since(start)) + " ms");
      // Calls fail at once; close does not wait for the stopped rank.
      const Clock::time_point closing = Clock::now();
      if (stopped == 0) error_of([&] { store.get("anything"); });
      store.close();
      CHILD_CHECK_MSG(ms_since(closing) < kShort.count(), std::to_string(ms_since(closing)) + " ms");
      return 0;
    };
  };
  for (int stopped : {2, 0}) {
    const auto stop = [](Store& store) -> int {
      store.barrier("ready");
      ::raise(SIGSTOP);
      return 0;
    };
    Job job =
        start_rank0(kWorld, stopped == 0 ? std::function<int(Store&)>(stop) : witness(stopped), "job-token", kShort);
    ASSERT_NE(job.port, 0);
    start_rank(job, 1, kWorld, witness(stopped), kShort);
    start_rank(job, 2, kWorld, stopped == 2 ? std::function<int(Store&)>(stop) : witness(stopped), kShort);
    // The witnesses end by themselves; then the stopped rank is killed.
    std::vector<pid_t> witnesses;
    for (int r = 0; r < kWorld; ++r)
      if (r != stopped) witnesses.push_back(job.pids[static_cast<size_t>(r)]);
    expect_all_succeeded(wait_all(witnesses));
    ::kill(job.pids[static_cast<size_t>(stopped)], SIGKILL);
    ::waitpid(job.pids[static_cast<size_t>(stopped)], nullptr, 0);
  }
}

// Every rank pings at the pace of the store's stall limit, which its welcome gives: a rank with a far
// longer H2_DICOMM_TIMEOUT than rank 0's would otherwise ping too rarely and be failed while idle.
TEST(Store, RanksWithOtherTimeoutsPingAtTheStoresPace) {
  constexpr int kWorld = 2;
  auto idle = [](Store& store) -> int {
    Failures failures;
    store.on_failure(failures.handler());
    store.barrier("ready");
    CHILD_CHECK_MSG(!failures.wait(3000ms).has_value(), failures.wait(0ms)->reason);
    store.barrier("still here");
    store.close();
    return 0;
  };
  Job job = start_rank0(kWorld, idle, "job-token", 1000ms);
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, kWorld, idle, 60000ms);
  expect_all_succeeded(wait_all(job.pids));
}

// The ranks' wait states name the rank a timed-out wait was waiting for.
TEST(MissingRanks, TheRankOutOfDiCommIsNamedElseTheRanksWaitForEachOther) {
  const auto rank = [](int r, bool waiting, long long in_state_ms, bool connected = true) {
    RankActivity a;
    a.rank = r;
    a.connected = connected;
    a.reported = true;
    a.waiting = waiting;
    a.in_state = std::chrono::milliseconds(in_state_ms);
    a.heard_ago = 200ms;
    return a;
  };
  // Rank 2 out of DiComm for the whole timeout; rank 3 between two calls; rank 4 gone.
  auto [blamed, text] = detail::missing_ranks({rank(0, true, 9800), rank(1, true, 10000), rank(2, false, 10300),
                                               rank(3, false, 100), rank(4, false, 20000, false)},
                                              0, 10000ms);
  EXPECT_EQ(blamed, 2);
  EXPECT_EQ(text,
            "; rank 2 is alive but not waiting in DiComm: out of it for 10.5 s (hanging in its own code, or computing "
            "for longer than the timeout); rank 1 waiting in DiComm too");
  std::tie(blamed, text) =
      detail::missing_ranks({rank(0, true, 9800), rank(1, true, 10000), rank(2, true, 10300)}, 0, 10000ms);
  EXPECT_EQ(blamed, -1);
  EXPECT_THAT(text, HasSubstr("every other rank is waiting in DiComm too, so the ranks wait for each other"));
  std::tie(blamed, text) = detail::missing_ranks({rank(0, true, 9800), rank(1, false, 300)}, 0, 10000ms);
  EXPECT_EQ(blamed, -1);
  EXPECT_EQ(text, "; rank 1 left DiComm less than half the timeout ago");
}

// Resident memory of this process, in bytes.
long resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * ::sysconf(_SC_PAGESIZE);
}

int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Strangers without the token used to cost rank 0 whatever they sent (4 partial 60 MiB frames grew
// it by 270 MB) and a descriptor each for as long as they liked (20,000 idle connections spun it at
// its descriptor limit). Now a frame before the welcome is at most 4 KiB and at most 64 connections
// wait for their hello: the store keeps serving its ranks, in bounded memory.
TEST(Store, StrangersCannotExhaustTheStore) {
  constexpr int kWorld = 2;
  Job job = start_rank0(kWorld, [&](Store& store) -> int {
    // A small descriptor limit, which the idle connections below would exhaust were they all kept.
    rlimit files{};
    CHILD_CHECK(::getrlimit(RLIMIT_NOFILE, &files) == 0);
    files.rlim_cur = std::min<rlim_t>(files.rlim_cur, 256);
    CHILD_CHECK(::setrlimit(RLIMIT_NOFILE, &files) == 0);
    const long before = resident_bytes();
    store.barrier("flooded");  // rank 1 floods before it comes here
    const long after = resident_bytes();
    CHILD_CHECK_MSG(after - before < (32l << 20), std::to_string((after - before) >> 20) + " MiB more");
    store.set("served", "yes");
    store.close();
    return 0;
  });
  ASSERT_NE(job.port, 0);
  const int port = job.port;
  std::vector<int> strangers;
  // Partial frames announcing 60 MiB each.
  for (int i = 0; i < 4; ++i) {
    const int fd = connect_raw(port);
    ASSERT_GE(fd, 0);
    const uint32_t length = htonl(60u << 20);
    std::string bytes(reinterpret_cast<const char*>(&length), 4);
    bytes += std::string(16 << 20, 'x');
    // As much of 16 MiB as the store takes within a second: it used to buffer all of it.
    size_t offset = 0;
    const Clock::time_point until = Clock::now() + 1s;
    while (offset < bytes.size() && Clock::now() < until) {
      const ssize_t n = ::send(fd, bytes.data() + offset, bytes.size() - offset, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) offset += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;  // dropped by the store
      if (n < 0) std::this_thread::sleep_for(1ms);
    }
    strangers.push_back(fd);
  }
  // Many more idle connections than the store holds.
  for (int i = 0; i < 500; ++i) {
    const int fd = connect_raw(port);
    if (fd >= 0) strangers.push_back(fd);
  }
  start_rank(job, 1, kWorld, [](Store& store) -> int {
    store.barrier("flooded");
    CHILD_CHECK(store.get("served") == "yes");
    store.close();
    return 0;
  });
  expect_all_succeeded(wait_all(job.pids));
  for (int fd : strangers) ::close(fd);
}

// Ends a client connection with a reset, so that thousands of them leave no TIME_WAIT behind.
void close_abruptly(int fd) {
  const linger abrupt{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abrupt, sizeof abrupt);
  ::close(fd);
}

// Whether the store has closed `fd` (a read sees the end or a reset), without blocking.
bool closed_by_store(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// A slowloris sends its hello one byte at a time, slowly enough to hold the connection forever were
// each byte to count as progress. The store drops it at the hello deadline, counted from the accept
// (no sooner: a slow rank on a busy machine must not be dropped), and serves its ranks meanwhile.
TEST(Store, ASlowlorisIsDroppedAtTheHelloDeadlineWhileRanksAreServed) {
  constexpr int kWorld = 2;
  using detail::kHelloDeadline;
  // The ranks work (set, get, barrier) from before the slowloris connects until past its deadline.
  const auto busy = [](int rank) {
    return [rank](Store& store) -> int {
      store.barrier("ready");
      const Clock::time_point until = Clock::now() + kHelloDeadline + 3s;
      for (int i = 0; Clock::now() < until; ++i) {
        const std::string key = "r" + std::to_string(rank) + "-" + std::to_string(i);
        store.set(key, std::to_string(i));
        CHILD_CHECK(store.get(key) == std::to_string(i));
        std::this_thread::sleep_for(50ms);
      }
      store.barrier("done");
      store.close();
      return 0;
    };
  };
  Job job = start_rank0(kWorld, busy(0));
  ASSERT_NE(job.port, 0);
  start_rank(job, 1, kWorld, busy(1));
  std::vector<int> slow;
  for (int i = 0; i < 3; ++i) slow.push_back(connect_raw(job.port));
  for (int fd : slow) ASSERT_GE(fd, 0);
  const Clock::time_point connected = Clock::now();
  // A frame header announcing a hello of 200 bytes, then payload bytes, one every 250 ms from each.
  const uint32_t length = htonl(200);
  std::string drip(reinterpret_cast<const char*>(&length), 4);
  drip += std::string(196, 'h');
  std::vector<Clock::time_point> dropped(slow.size(), Clock::time_point::max());
  size_t open = slow.size();
  for (size_t sent = 0; open > 0 && Clock::now() < connected + kHelloDeadline + 5s; ++sent) {
    for (size_t i = 0; i < slow.size(); ++i) {
      if (dropped[i] != Clock::time_point::max()) continue;
      const char byte = drip[sent % drip.size()];
      if (closed_by_store(slow[i]) || ::send(slow[i], &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
        dropped[i] = Clock::now();
        --open;
      }
    }
    std::this_thread::sleep_for(250ms);
  }
  for (size_t i = 0; i < slow.size(); ++i) {
    ASSERT_NE(dropped[i], Clock::time_point::max())
        << "slowloris " << i << " still connected after " << ms_since(connected) << " ms";
    const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(dropped[i] - connected);
    EXPECT_GE(after, kHelloDeadline - 500ms) << "slowloris " << i << " dropped before the hello deadline";
    close_abruptly(slow[i]);
  }
  expect_all_succeeded(
      wait_all(job.pids, kChildLimit + std::chrono::duration_cast<std::chrono::seconds>(kHelloDeadline)));
}

// Resident memory of a process, now and at its peak, in bytes (from /proc/PID/status).
std::pair<long, long> resident_now_and_peak(pid_t pid) {
  long now = 0, peak = 0;
  if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      std::sscanf(line, "VmRSS: %ld kB", &now);
      std::sscanf(line, "VmHWM: %ld kB", &peak);
    }
    std::fclose(f);
  }
  return {now << 10, peak << 10};
}

// Too slow for the quick suite (the slow suite runs it alone): 20,000 junk connections (half send
// garbage, half nothing) and three slowloris while rank 1 works with the store throughout; rank 0's
// memory stays bounded and the job is served.
TEST(StoreStress, TwentyThousandJunkConnectionsAndASlowloris) {
  constexpr int kWorld = 2;
  constexpr int kJunk = 20000;
  // The parent closes its end of this pipe when the flood is over: both ranks then read its end.
  int flood[2];
  ASSERT_EQ(::pipe(flood), 0);
  Job job = start_rank0(kWorld, [&](Store& store) -> int {
    ::close(flood[1]);
    store.barrier("ready");
    char byte = 0;
    CHILD_CHECK(::read(flood[0], &byte, 1) == 0);
    store.barrier("flood over");
    store.set("served", "yes");
    store.close();
    return 0;
  });
  ASSERT_NE(job.port, 0);
  // Rank 1 reports how many operations it did during the flood and the slowest, through a pipe.
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  start_rank(job, 1, kWorld, [&](Store& store) -> int {
    ::close(flood[1]);
    ::close(report[0]);
    store.barrier("ready");
    long long counts[2] = {0, 0};  // operations, slowest in ms
    for (int i = 0;; ++i) {
      const Clock::time_point start = Clock::now();
      store.set("w", std::to_string(i));
      CHILD_CHECK(store.get("w") == std::to_string(i));
      counts[0] += 2;
      counts[1] = std::max(counts[1], ms_since(start));
      pollfd over{flood[0], POLLIN, 0};
      if (::poll(&over, 1, 5) == 1) break;  // the end of the flood (POLLHUP counts too)
    }
    CHILD_CHECK(::write(report[1], counts, sizeof counts) == sizeof counts);
    store.barrier("flood over");
    CHILD_CHECK(store.get("served") == "yes");
    store.close();
    return 0;
  });
  ::close(flood[0]);
  ::close(report[1]);
  const pid_t rank0 = job.pids[0];
  const long before = resident_now_and_peak(rank0).first;
  const Clock::time_point start = Clock::now();
  std::vector<int> slow;
  for (int i = 0; i < 3; ++i) slow.push_back(connect_raw(job.port));
  std::vector<int> held;  // at most 1000 open on this side at once
  int connected = 0;
  uint32_t seed = 12345;
  for (int i = 0; i < kJunk; ++i) {
    const int fd = connect_raw(job.port);
    if (fd < 0) continue;
    ++connected;
    if (i % 2 == 0) {
      std::string junk(64 + (i % 4000), '\0');
      for (char& c : junk) c = static_cast<char>((seed = seed * 1103515245u + 12345u) >> 24);
      (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    held.push_back(fd);
    if (held.size() >= 1000) {
      for (int h : held) close_abruptly(h);
      held.clear();
    }
    if (i % 100 == 0)
      for (int s : slow) (void)::send(s, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  const long long flood_ms = ms_since(start);
  const auto [after, peak] = resident_now_and_peak(rank0);
  for (int h : held) close_abruptly(h);
  for (int s : slow) close_abruptly(s);
  ::close(flood[1]);
  long long counts[2] = {0, 0};
  const ssize_t got = ::read(report[0], counts, sizeof counts);
  ::close(report[0]);
  expect_all_succeeded(wait_all(job.pids, std::chrono::seconds(120)));
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof counts));
  std::printf(
      "%d junk connections (of %d tried) in %.1f s; rank 1 did %lld store operations meanwhile, the "
      "slowest %lld ms; rank 0 resident %.1f MiB before, %.1f MiB after, peak %.1f MiB\n",
      connected, kJunk, static_cast<double>(flood_ms) / 1000, counts[0], counts[1],
      static_cast<double>(before) / (1 << 20), static_cast<double>(after) / (1 << 20),
      static_cast<double>(peak) / (1 << 20));
  EXPECT_GT(counts[0], 0);
  EXPECT_LT(after - before, 64l << 20);
}

}  // namespace
}  // namespace h2::dicomm
