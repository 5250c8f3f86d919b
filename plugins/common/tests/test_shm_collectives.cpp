// The shared-memory collective engine's two paths (plugins/common/shm_collectives.hpp): through its
// segment, and in place on the ranks' buffers. Ranks are forked processes whose buffers lie in one
// shared anonymous mapping made before the fork, so a place is an offset into it. Each rank reports
// a failed check in its exit code and on stderr; every rank's time is bounded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "float16.hpp"
#include "plugin_error.hpp"
#include "shm_collectives.hpp"

namespace h2::plugin {
namespace {

using namespace std::chrono_literals;

constexpr int kRanks = 4;
constexpr uint64_t kCount = 100'003;  // several slots' worth of f32 and not a multiple of the ranks
// Each rank's region of the shared mapping: room for the largest buffer of any call below, twice.
constexpr size_t kRegionBytes = 2 * kRanks * kCount * sizeof(float) + 4096;

#define RANK_CHECK(condition)                                                                      \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      std::fprintf(stderr, "rank %d: %s:%d: expected %s\n", rank, __FILE__, __LINE__, #condition); \
      return 3;                                                                                    \
    }                                                                                              \
  } while (0)

// Runs `body` in kRanks processes; returns each one's exit code (-signal when killed).
std::vector<int> run_ranks(const std::function<int(int rank)>& body) {
  std::vector<pid_t> children;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
      alarm(60);  // a rank that hangs is killed, and the test names it
      int code = 0;
      try {
        code = body(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 22;
      }
      std::fflush(stderr);
      _exit(code);
    }
    children.push_back(child);
  }
  std::vector<int> codes;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  return codes;
}

void expect_all_passed(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " (see its messages above)";
}

// Every rank's buffers, in one mapping the forked ranks share.
class SharedBuffers {
 public:
  SharedBuffers() {
    void* mapped = mmap(nullptr, kRanks * kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(mapped);
  }
  ~SharedBuffers() { munmap(base_, kRanks * kRegionBytes); }
  SharedBuffers(const SharedBuffers&) = delete;
  SharedBuffers& operator=(const SharedBuffers&) = delete;

  char* region(int rank) const { return base_ + static_cast<size_t>(rank) * kRegionBytes; }
  ShmComm::Place place_of(const void* ptr) const {
    ShmComm::Place place;
    const uint64_t offset = static_cast<uint64_t>(static_cast<const char*>(ptr) - base_);
    std::memcpy(place.bytes, &offset, sizeof offset);
    place.known = true;
    return place;
  }
  // Opens what place_of said; `refuse` makes this rank unable to open anything.
  ShmComm::InPlace in_place(uint64_t from_bytes, bool refuse = false) const {
    return {[this, refuse](const ShmComm::Place& place, uint64_t) -> char* {
              if (refuse) return nullptr;
              uint64_t offset = 0;
              std::memcpy(&offset, place.bytes, sizeof offset);
              return base_ + offset;
            },
            from_bytes};
  }

 private:
  char* base_ = nullptr;
};

float value(int rank, uint64_t i) {
  // Not whole numbers: sums depend on the order of the additions, which both paths must share.
  return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(rank)) * 1000.0f / static_cast<float>(rank + 3);
}

// One rank's run of every collective on `comm`, in place where the communicator allows, recording
// every result in `out` (bytes, in call order).
void run_every_collective(ShmComm& comm, const SharedBuffers& shared, int rank, std::vector<char>& out) {
  const auto record = [&](const void* data, size_t bytes) {
    out.insert(out.end(), static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  };
  float* a = reinterpret_cast<float*>(shared.region(rank));
  float* b = a + kRanks * kCount;
  const auto place = [&](const void* p) { return shared.place_of(p); };
  for (uint64_t i = 0; i < kCount; ++i) a[i] = value(rank, i);
  for (uint32_t op : {H2_REDUCE_SUM, H2_REDUCE_MAX, H2_REDUCE_MEAN}) {
    const ShmComm::Place pa = place(a), pb = place(b);
    comm.allreduce(a, b, kCount, H2_DTYPE_F32, op, &pa, &pb);
    record(b, kCount * sizeof(float));
  }
  // In place, bf16 average: summed in f32, divided and rounded once.
  uint16_t* h = reinterpret_cast<uint16_t*>(a);
  for (uint64_t i = 0; i < kCount; ++i) h[i] = f64_to_bf16(value(rank, i));
  const ShmComm::Place ph = place(h);
  comm.allreduce(h, h, kCount, H2_DTYPE_BF16, H2_REDUCE_MEAN, &ph, &ph);
  record(h, kCount * sizeof(uint16_t));
  // Reduce-scatter of kRanks blocks into this rank's block; allgather in place; broadcast from 2.
  for (uint64_t i = 0; i < kRanks * kCount; ++i) a[i] = value(rank, i);
  const ShmComm::Place pa = place(a);
  comm.reduce_scatter(a, b, kCount, H2_DTYPE_F32, H2_REDUCE_SUM, &pa);
  record(b, kCount * sizeof(float));
  float* own = b + rank * kCount;
  for (uint64_t i = 0; i < kCount; ++i) own[i] = value(rank + 7, i);
  const ShmComm::Place po = place(own);
  comm.allgather(own, b, kCount, H2_DTYPE_F32, &po);
  record(b, kRanks * kCount * sizeof(float));
  for (uint64_t i = 0; i < kCount; ++i) a[i] = rank == 2 ? value(9, i) : -1.0f;
  comm.broadcast(rank == 2 ? a : nullptr, a, kCount, H2_DTYPE_F32, 2, rank == 2 ? &pa : nullptr);
  record(a, kCount * sizeof(float));
}

constexpr uint64_t kCallsPerRun = 7;

TEST(ShmCollectives, InPlaceAndThroughTheSegmentGiveTheSameBytes) {
  SharedBuffers shared;
  uint8_t in_place_id[kShmCommIdBytes], segment_id[kShmCommIdBytes];
  new_shm_comm_id(in_place_id);
  new_shm_comm_id(segment_id);
  expect_all_passed(run_ranks([&](int rank) {
    std::vector<char> in_place, segment;
    {
      ShmComm comm(in_place_id, kRanks, rank, 30s, shared.in_place(1));
      run_every_collective(comm, shared, rank, in_place);
      RANK_CHECK(comm.calls_in_place() == kCallsPerRun);
    }
    {
      ShmComm comm(segment_id, kRanks, rank, 30s);
      run_every_collective(comm, shared, rank, segment);
      RANK_CHECK(comm.calls_in_place() == 0);
    }
    RANK_CHECK(in_place.size() == segment.size());
    RANK_CHECK(std::memcmp(in_place.data(), segment.data(), in_place.size()) == 0);
    // And the values are right: the first allreduce is the sum, within f32 rounding.
    const float* sum = reinterpret_cast<const float*>(in_place.data());
    for (uint64_t i = 0; i < kCount; i += 997) {
      double expected = 0;
      for (int r = 0; r < kRanks; ++r) expected += value(r, i);
      RANK_CHECK(std::abs(sum[i] - expected) <= 1e-3);
    }
    return 0;
  }));
}

TEST(ShmCollectives, CallsBelowTheInPlaceSizeGoThroughTheSegment) {
  SharedBuffers shared;
  uint8_t id[kShmCommIdBytes];
  new_shm_comm_id(id);
  expect_all_passed(run_ranks([&](int rank) {
    ShmComm comm(id, kRanks, rank, 30s, shared.in_place(kRanks * kCount * sizeof(float)));
    std::vector<char> results;
    run_every_collective(comm, shared, rank, results);
    // Only the reduce-scatter and the allgather move kRanks * kCount floats in all.
    RANK_CHECK(comm.calls_in_place() == 2);
    return 0;
  }));
}

TEST(ShmCollectives, ARankThatCannotOpenAPlaceSendsEveryRankThroughTheSegment) {
  SharedBuffers shared;
  uint8_t in_place_id[kShmCommIdBytes], segment_id[kShmCommIdBytes];
  new_shm_comm_id(in_place_id);
  new_shm_comm_id(segment_id);
  expect_all_passed(run_ranks([&](int rank) {
    std::vector<char> refused, segment;
    {
      ShmComm comm(in_place_id, kRanks, rank, 30s, shared.in_place(1, rank == 2));
      run_every_collective(comm, shared, rank, refused);
      // The first call finds that rank 2 cannot open the others' buffers, and none tries again.
      RANK_CHECK(comm.calls_in_place() == 0);
    }
    {
      ShmComm comm(segment_id, kRanks, rank, 30s);
      run_every_collective(comm, shared, rank, segment);
    }
    RANK_CHECK(std::memcmp(refused.data(), segment.data(), refused.size()) == 0);
    return 0;
  }));
}

TEST(ShmCollectives, ABufferWithoutAPlaceSendsThatCallThroughTheSegment) {
  SharedBuffers shared;
  uint8_t id[kShmCommIdBytes];
  new_shm_comm_id(id);
  expect_all_passed(run_ranks([&](int rank) {
    ShmComm comm(id, kRanks, rank, 30s, shared.in_place(1));
    float* a = reinterpret_cast<float*>(shared.region(rank));
    float* b = a + kCount;
    for (uint64_t i = 0; i < kCount; ++i) a[i] = value(rank, i);
    const ShmComm::Place pa = shared.place_of(a), pb = shared.place_of(b);
    // Rank 1's output has no place in the first call (an import, say): only that call is copied.
    comm.allreduce(a, b, kCount, H2_DTYPE_F32, H2_REDUCE_SUM, &pa, rank == 1 ? nullptr : &pb);
    RANK_CHECK(comm.calls_in_place() == 0);
    std::vector<float> first(b, b + kCount);
    comm.allreduce(a, b, kCount, H2_DTYPE_F32, H2_REDUCE_SUM, &pa, &pb);
    RANK_CHECK(comm.calls_in_place() == 1);
    RANK_CHECK(std::memcmp(first.data(), b, kCount * sizeof(float)) == 0);
    return 0;
  }));
}

TEST(ShmCollectives, RanksSetDifferentlyForInPlaceAreRefusedAtJoin) {
  SharedBuffers shared;
  uint8_t id[kShmCommIdBytes];
  new_shm_comm_id(id);
  expect_all_passed(run_ranks([&](int rank) {
    try {
      ShmComm comm(id, kRanks, rank, 30s, shared.in_place(rank == 0 ? 0 : 65536));
    } catch (const PluginError& e) {
      RANK_CHECK(e.status() == H2_STATUS_INVALID_ARGUMENT);
      const std::string said = e.what();
      RANK_CHECK(said.find("every rank must be set alike") != std::string::npos);
      RANK_CHECK(said.find(rank == 0 ? "in place never, rank 1 from 65536 bytes" : "rank 0 never") !=
                 std::string::npos);
      return 0;
    }
    std::fprintf(stderr, "rank %d: joined a communicator whose ranks disagree\n", rank);
    return 4;
  }));
}

}  // namespace
}  // namespace h2::plugin
