#include "shm_collectives.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <random>
#include <thread>

#include "collective_checks.hpp"
#include "dtype_size.hpp"
#include "float16.hpp"
#include "plugin_error.hpp"

namespace h2::plugin {

namespace {

constexpr char kMagic[8] = {'h', '2', 's', 'h', 'm', 'c', '1', '\0'};
constexpr size_t kHostBytes = 64;
constexpr size_t kRandomBytes = 16;
constexpr size_t kPage = 4096;

struct IdLayout {
  char magic[8];
  char host[kHostBytes];
  uint8_t random[kRandomBytes];
};
static_assert(sizeof(IdLayout) == kShmCommIdBytes);

std::string this_host() {
  char host[kHostBytes] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string errno_text(int error) {
  char buffer[128];
  return strerror_r(error, buffer, sizeof buffer);
}

size_t round_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

// Whether `a` is at or after `b` on a counter that may wrap.
bool reached(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) >= 0;
}

// out[i] = op over the inputs' element i, combined in rank order in `Acc`: one pass per input over
// an accumulator, so that the loops vectorize.
template <typename T, typename Acc, typename Load, typename Store>
void reduce_into(const std::vector<const char*>& inputs, void* out, uint64_t count, uint32_t op, Load load,
                 Store store) {
  thread_local std::vector<Acc> acc;
  acc.resize(count);
  const T* first = reinterpret_cast<const T*>(inputs[0]);
  for (uint64_t i = 0; i < count; ++i) acc[i] = load(first[i]);
  for (size_t r = 1; r < inputs.size(); ++r) {
    const T* in = reinterpret_cast<const T*>(inputs[r]);
    if (op == H2_REDUCE_MAX) {
      // NaN propagates, as the reduce operator's MAX does.
      for (uint64_t i = 0; i < count; ++i) {
        const Acc value = load(in[i]);
        acc[i] = (value > acc[i] || value != value) && acc[i] == acc[i] ? value : acc[i];
      }
    } else {
      for (uint64_t i = 0; i < count; ++i) acc[i] += load(in[i]);
    }
  }
  T* result = static_cast<T*>(out);
  const Acc n = static_cast<Acc>(inputs.size());
  if (op == H2_REDUCE_MEAN) {
    for (uint64_t i = 0; i < count; ++i) result[i] = store(acc[i] / n);
  } else {
    for (uint64_t i = 0; i < count; ++i) result[i] = store(acc[i]);
  }
}

void reduce(const std::vector<const char*>& inputs, void* out, uint64_t count, uint32_t dtype, uint32_t op) {
  const auto same = [](auto v) { return v; };
  switch (dtype) {
    case H2_DTYPE_F32: return reduce_into<float, float>(inputs, out, count, op, same, same);
    case H2_DTYPE_F64: return reduce_into<double, double>(inputs, out, count, op, same, same);
    case H2_DTYPE_I32: return reduce_into<int32_t, int32_t>(inputs, out, count, op, same, same);
    case H2_DTYPE_I64: return reduce_into<int64_t, int64_t>(inputs, out, count, op, same, same);
    case H2_DTYPE_U8: return reduce_into<uint8_t, uint8_t>(inputs, out, count, op, same, same);
    case H2_DTYPE_F16:
      return reduce_into<uint16_t, float>(
          inputs, out, count, op, [](uint16_t b) { return static_cast<float>(f16_to_f64(b)); },
          [](float v) { return f64_to_f16(v); });
    case H2_DTYPE_BF16:
      return reduce_into<uint16_t, float>(
          inputs, out, count, op, [](uint16_t b) { return static_cast<float>(bf16_to_f64(b)); },
          [](float v) { return f64_to_bf16(v); });
    default: fail(H2_STATUS_UNSUPPORTED, "no reduction of dtype " + std::to_string(dtype));
  }
}

long futex(std::atomic<uint32_t>* word, int operation, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory other processes map.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), operation, value, timeout, nullptr, 0);
}

}  // namespace

struct ShmComm::Control {
  char magic[8];
  std::atomic<int32_t> ranks;   // set by the first rank to map the segment; 0 before
  std::atomic<int32_t> joined;  // ranks that have mapped it
  std::atomic<uint32_t> bell;   // bumped (and woken) whenever any counter below moves
  std::atomic<uint32_t> aborted;
  std::atomic<int32_t> aborted_by;
  char reason[512];
};

struct alignas(64) ShmComm::RankState {
  std::atomic<uint32_t> posted;          // collective steps whose part this rank has put in its slot
  std::atomic<uint32_t> consumed;        // collective steps this rank has finished reading
  std::atomic<int32_t> pid;              // 0 until joined
  std::atomic<uint64_t> in_place_bytes;  // InPlace::from_bytes of the rank, set before it joins
};

struct alignas(64) ShmComm::Channel {
  std::atomic<uint32_t> written;  // chunks put into the channel by its sender
  std::atomic<uint32_t> read;     // chunks taken out by its receiver
};

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory counters must be lock-free to work across processes");

void new_shm_comm_id(uint8_t* id) {
  IdLayout layout{};
  std::memcpy(layout.magic, kMagic, sizeof kMagic);
  const std::string host = this_host();
  std::memcpy(layout.host, host.data(), std::min(host.size(), kHostBytes - 1));
  std::random_device random;
  for (uint8_t& b : layout.random) b = static_cast<uint8_t>(random());
  std::memcpy(id, &layout, sizeof layout);
}

ShmComm::ShmComm(const uint8_t* id, int ranks, int rank, std::chrono::milliseconds timeout)
    : ShmComm(id, ranks, rank, timeout, InPlace{}) {}

ShmComm::ShmComm(const uint8_t* id, int ranks, int rank, std::chrono::milliseconds timeout, InPlace in_place)
    : in_place_(std::move(in_place)), size_(ranks), rank_(rank), timeout_(timeout) {
  if (!in_place_.open) in_place_.from_bytes = 0;
  IdLayout layout;
  std::memcpy(&layout, id, sizeof layout);
  if (std::memcmp(layout.magic, kMagic, sizeof kMagic) != 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "the unique id is not one this plugin's get_unique_id made");
  layout.host[kHostBytes - 1] = '\0';
  if (this_host() != layout.host)
    fail(H2_STATUS_UNSUPPORTED, "the communicator was made on host '" + std::string(layout.host) +
                                    "' and this rank runs on '" + this_host() +
                                    "': this library joins the processes of one node only");
  if (ranks < 1 || ranks > kMaxRanks || rank < 0 || rank >= ranks)
    fail(H2_STATUS_INVALID_ARGUMENT, "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                                         " (this library joins 1 to " + std::to_string(kMaxRanks) + " ranks)");
  static const char* digits = "0123456789abcdef";
  name_ = "/h2-shm-comm-";
  for (uint8_t b : layout.random) (name_ += digits[b >> 4]) += digits[b & 15];

  // A slot carries a step of a collective; a channel a chunk of a point-to-point message. Channels
  // shrink with the square of the rank count, to 16 KiB: the segment is about 25 MiB at 8 ranks, 130 MiB
  // at 64 and 1.3 GiB at 256 (all reserved when the communicator is made).
  const auto n = static_cast<size_t>(ranks);
  slot_bytes_ = 1 << 20;
  channel_bytes_ = std::clamp<size_t>(round_up((16u << 20) / (n * n), kPage), 16 << 10, 256 << 10);
  ranks_at_ = round_up(sizeof(Control), kPage);
  channels_at_ = round_up(ranks_at_ + n * sizeof(RankState), kPage);
  slots_at_ = round_up(channels_at_ + n * n * sizeof(Channel), kPage);
  result_at_ = slots_at_ + n * slot_bytes_;
  channel_data_at_ = result_at_ + slot_bytes_;
  bytes_ = channel_data_at_ + n * n * channel_bytes_;

  const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0) fail(H2_STATUS_DEVICE_ERROR, "shm_open(" + name_ + "): " + errno_text(errno));
  // Reserve the pages now: on a full /dev/shm that is an error here rather than a SIGBUS mid-step.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name_.c_str());
    fail(reserved == ENOSPC ? H2_STATUS_OUT_OF_MEMORY : H2_STATUS_DEVICE_ERROR,
         "reserving " + std::to_string(bytes_ >> 20) + " MiB of shared memory for " + std::to_string(ranks) +
             " ranks in " + name_ + ": " + errno_text(reserved));
  }
  void* mapped = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    shm_unlink(name_.c_str());
    fail(H2_STATUS_DEVICE_ERROR, "mmap of " + name_ + ": " + errno_text(errno));
  }
  base_ = static_cast<char*>(mapped);
  Control& c = control();
  int32_t expected = 0;
  if (!c.ranks.compare_exchange_strong(expected, ranks) && expected != ranks) {
    munmap(base_, bytes_);
    base_ = nullptr;
    fail(H2_STATUS_INVALID_ARGUMENT, "rank " + std::to_string(rank) + " was told the communicator has " +
                                         std::to_string(ranks) + " ranks, another rank " + std::to_string(expected));
  }
  state(rank).in_place_bytes.store(in_place_.from_bytes);
  state(rank).pid.store(static_cast<int32_t>(getpid()));
  c.joined.fetch_add(1);
  ring();
  try {
    wait([&] { return c.joined.load() >= ranks; },
         [&] {
           std::string missing;
           for (int r = 0; r < size_; ++r)
             if (state(r).pid.load() == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
           return "ranks " + missing + " to join";
         });
  } catch (...) {
    shm_unlink(name_.c_str());
    munmap(base_, bytes_);
    base_ = nullptr;
    throw;
  }
  shm_unlink(name_.c_str());  // every rank has it mapped: nothing is left behind when they end
  // A call runs in place on every rank or on none: a rank that went its own way would wait for steps
  // the others never take.
  for (int r = 0; r < size_; ++r) {
    const uint64_t theirs = state(r).in_place_bytes.load();
    if (theirs != in_place_.from_bytes) {
      const auto describe = [](uint64_t bytes) {
        return bytes == 0 ? std::string("never") : "from " + std::to_string(bytes) + " bytes";
      };
      munmap(base_, bytes_);
      base_ = nullptr;
      fail(H2_STATUS_INVALID_ARGUMENT, "rank " + std::to_string(rank_) + " runs collectives in place " +
                                           describe(in_place_.from_bytes) + ", rank " + std::to_string(r) + " " +
                                           describe(theirs) + ": every rank must be set alike");
    }
  }
}

ShmComm::~ShmComm() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

ShmComm::Control& ShmComm::control() const {
  return *reinterpret_cast<Control*>(base_);
}
ShmComm::RankState& ShmComm::state(int rank) const {
  return reinterpret_cast<RankState*>(base_ + ranks_at_)[rank];
}
ShmComm::Channel& ShmComm::channel(int from, int to) const {
  return reinterpret_cast<Channel*>(base_ + channels_at_)[from * size_ + to];
}
char* ShmComm::slot(int rank) const {
  return base_ + slots_at_ + static_cast<size_t>(rank) * slot_bytes_;
}
char* ShmComm::channel_data(int from, int to) const {
  return base_ + channel_data_at_ + static_cast<size_t>(from * size_ + to) * channel_bytes_;
}

void ShmComm::check_aborted() const {
  Control& c = control();
  uint32_t state = c.aborted.load();
  // 2: the aborting rank is writing its reason, which takes it a moment (unless it died meanwhile).
  for (int waits = 0; state == 2 && waits < 100; ++waits) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state = c.aborted.load();
  }
  if (state != 0)
    fail(H2_STATUS_DEVICE_ERROR, "the communicator was aborted by rank " + std::to_string(c.aborted_by.load()) + ": " +
                                     std::string(c.reason, strnlen(c.reason, sizeof c.reason)));
}

void ShmComm::ring() const {
  control().bell.fetch_add(1);
  futex(&control().bell, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmComm::wait(const std::function<bool()>& ready, const std::function<std::string()>& waiting_for) {
  Control& c = control();
  const auto start = std::chrono::steady_clock::now();
  auto next_liveness_check = start + std::chrono::milliseconds(100);
  for (int spins = 0;; ++spins) {
    const uint32_t bell = c.bell.load();
    if (ready()) return;
    check_aborted();
    if (spins < 64) {
      std::this_thread::yield();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(100);
      for (int r = 0; r < size_; ++r) {
        const int32_t pid = state(r).pid.load();
        if (pid != 0 && kill(pid, 0) != 0 && errno == ESRCH) {
          // A rank that failed aborts before it exits: its reason names the rank that broke the
          // communicator, which this rank's own check may have missed by a moment.
          check_aborted();
          give_up("rank " + std::to_string(r) + " (process " + std::to_string(pid) + ") has exited while rank " +
                  std::to_string(rank_) + " waited for " + waiting_for());
        }
      }
    }
    if (now - start >= timeout_)
      give_up("rank " + std::to_string(rank_) + " timed out after " +
              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count()) +
              " ms waiting for " + waiting_for());
    const timespec slice{0, 20'000'000};  // wake now and then for the liveness check and the deadline
    futex(&c.bell, FUTEX_WAIT, bell, &slice);
  }
}

void ShmComm::give_up(const std::string& why) {
  // The communicator is broken for every rank: abort it with the cause, so that the other ranks fail
  // now naming it, rather than later naming this rank's exit or their own timeout.
  // Another rank may have aborted first, naming the cause this rank only saw the effect of.
  if (!mark_aborted(why)) check_aborted();
  fail(H2_STATUS_DEVICE_ERROR, why);
}

void ShmComm::step(const char* call, const std::function<void(char*)>& put, const std::function<void()>& take,
                   int only_from) {
  check_aborted();
  const uint32_t s = ++steps_;
  const auto missing = [&](auto counter, uint32_t target, const char* verb) {
    std::string list;
    for (int r = 0; r < size_; ++r)
      if (!reached((state(r).*counter).load(), target)) list += (list.empty() ? "" : ", ") + std::to_string(r);
    return std::string("ranks ") + list + " to " + verb + " step " + std::to_string(target) + " (" + call + ")";
  };
  // Every rank has read what this rank put in its slot last step.
  wait(
      [&] {
        for (int r = 0; r < size_; ++r)
          if (!reached(state(r).consumed.load(), s - 1)) return false;
        return true;
      },
      [&] { return missing(&RankState::consumed, s - 1, "finish"); });
  put(slot(rank_));
  state(rank_).posted.store(s);
  ring();
  wait(
      [&] {
        if (only_from >= 0) return reached(state(only_from).posted.load(), s);
        for (int r = 0; r < size_; ++r)
          if (!reached(state(r).posted.load(), s)) return false;
        return true;
      },
      [&] { return missing(&RankState::posted, s, "start"); });
  take();
  state(rank_).consumed.store(s);
  ring();
}

bool ShmComm::open_in_place(const char* call, uint64_t bytes, const InPlaceCall& c, Buffers& b) {
  // from_bytes is 0 without `open` (the constructor) and once an open has failed.
  if (in_place_.from_bytes == 0 || bytes < in_place_.from_bytes || size_ < 2) return false;
  struct Published {
    Place send, recv;
  };
  static_assert(sizeof(Published) + 1 <= 1 << 20, "a slot holds what a rank publishes");
  const auto n = static_cast<size_t>(size_);
  b.sends.assign(n, nullptr);
  b.recvs.assign(n, nullptr);
  // What this rank found: 1 every place it needs opened; 2 a place is unknown (a buffer other
  // processes cannot open, this call only); 3 a place could not be opened (which does not change
  // from call to call: the communicator stops trying, on every rank alike).
  char found = 1;
  step(
      call,
      [&](char* mine) {
        Published p;
        if (c.send_place != nullptr) p.send = *c.send_place;
        if (c.recv_place != nullptr) p.recv = *c.recv_place;
        std::memcpy(mine, &p, sizeof p);
      },
      [&] {
        const auto open = [&](const Place& place, uint64_t bytes, auto& into) {
          if (!place.known) {
            found = std::max<char>(found, 2);
            return;
          }
          into = in_place_.open(place, bytes);
          if (into == nullptr) found = 3;
        };
        for (int r = 0; r < size_; ++r) {
          const auto i = static_cast<size_t>(r);
          const bool send_needed = c.send_from < 0 || c.send_from == r;
          if (r == rank_) {
            // Its own buffers as they are. Whether its places are known the other ranks find out,
            // each opening them (there are at least two ranks).
            b.sends[i] = static_cast<const char*>(c.send);
            b.recvs[i] = static_cast<char*>(c.recv);
            continue;
          }
          Published p;
          std::memcpy(&p, slot(r), sizeof p);
          if (send_needed) open(p.send, c.send_bytes, b.sends[i]);
          if (c.peer_recvs) open(p.recv, c.recv_bytes, b.recvs[i]);
        }
      });
  char worst = 1;
  step(
      call, [&](char* mine) { *mine = found; },
      [&] {
        for (int r = 0; r < size_; ++r) worst = std::max(worst, *slot(r));
      });
  if (worst == 3) in_place_.from_bytes = 0;
  return worst == 1;
}

void ShmComm::finish_in_place(const char* call) {
  step(
      call, [](char*) {}, [] {});
  ++calls_in_place_;
}

void ShmComm::check_peer(int peer) const {
  check_collective_peer(peer, rank_, size_);
}

void ShmComm::allreduce(const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                        const Place* send_place, const Place* recv_place) {
  check_collective_reduction(dtype, op);
  const size_t e = collective_element_size(dtype);
  Buffers in_place;
  if (open_in_place("allreduce", count * e,
                    {.send = send,
                     .send_place = send_place,
                     .send_bytes = count * e,
                     .recv = recv,
                     .recv_place = recv_place,
                     .recv_bytes = count * e,
                     .peer_recvs = true},
                    in_place)) {
    // This rank's share of every rank's input, reduced a piece at a time into its own output; then,
    // once every rank has reduced its share, the other shares read from their ranks' outputs. A
    // rank writes only its own output: one whose call failed (an abort, a peer gone) and returned
    // finds no other rank writing into its memory afterwards.
    const auto share = [&](int r) {
      return std::pair{count * static_cast<uint64_t>(r) / static_cast<uint64_t>(size_),
                       count * static_cast<uint64_t>(r + 1) / static_cast<uint64_t>(size_)};
    };
    const auto [share_begin, share_end] = share(rank_);
    char* mine = in_place.recvs[static_cast<size_t>(rank_)];
    std::vector<const char*> inputs(static_cast<size_t>(size_));
    for (uint64_t at = share_begin; at < share_end; at += kInPlacePiece) {
      const uint64_t n = std::min(kInPlacePiece, share_end - at);
      for (int r = 0; r < size_; ++r) inputs[static_cast<size_t>(r)] = in_place.sends[static_cast<size_t>(r)] + at * e;
      reduce(inputs, mine + at * e, n, dtype, op);
    }
    step(
        "allreduce", [](char*) {}, [] {});
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const auto [begin, end] = share(r);
      std::memcpy(mine + begin * e, in_place.recvs[static_cast<size_t>(r)] + begin * e, (end - begin) * e);
    }
    finish_in_place("allreduce");
    return;
  }
  const uint64_t chunk = slot_bytes_ / e;
  char* result = base_ + result_at_;
  std::vector<const char*> inputs(static_cast<size_t>(size_));
  for (uint64_t begin = 0; begin < count; begin += chunk) {
    const uint64_t n = std::min(chunk, count - begin);
    // Each rank reduces its share of the chunk from every slot into the result region (a
    // reduce-scatter, so no element is added twice), then every rank copies the whole result out.
    const uint64_t share_begin = n * static_cast<uint64_t>(rank_) / static_cast<uint64_t>(size_);
    const uint64_t share_end = n * static_cast<uint64_t>(rank_ + 1) / static_cast<uint64_t>(size_);
    step(
        "allreduce", [&](char* mine) { std::memcpy(mine, static_cast<const char*>(send) + begin * e, n * e); },
        [&] {
          for (int r = 0; r < size_; ++r) inputs[static_cast<size_t>(r)] = slot(r) + share_begin * e;
          reduce(inputs, result + share_begin * e, share_end - share_begin, dtype, op);
        });
    step(
        "allreduce", [](char*) {}, [&] { std::memcpy(static_cast<char*>(recv) + begin * e, result, n * e); });
  }
}

void ShmComm::reduce_scatter(const void* send, void* recv, uint64_t recv_count, uint32_t dtype, uint32_t op,
                             const Place* send_place) {
  check_collective_reduction(dtype, op);
  const size_t e = collective_element_size(dtype);
  const uint64_t all = recv_count * e * static_cast<uint64_t>(size_);
  Buffers in_place;
  if (open_in_place("reduce_scatter", all, {.send = send, .send_place = send_place, .send_bytes = all, .recv = recv},
                    in_place)) {
    // This rank's block of every rank's input, into its own output.
    std::vector<const char*> inputs(static_cast<size_t>(size_));
    for (uint64_t at = 0; at < recv_count; at += kInPlacePiece) {
      const uint64_t n = std::min(kInPlacePiece, recv_count - at);
      for (int r = 0; r < size_; ++r)
        inputs[static_cast<size_t>(r)] =
            in_place.sends[static_cast<size_t>(r)] + (static_cast<uint64_t>(rank_) * recv_count + at) * e;
      reduce(inputs, static_cast<char*>(recv) + at * e, n, dtype, op);
    }
    finish_in_place("reduce_scatter");
    return;
  }
  const uint64_t chunk = slot_bytes_ / e / static_cast<uint64_t>(size_);  // of each block per step
  std::vector<const char*> inputs(static_cast<size_t>(size_));
  for (uint64_t begin = 0; begin < recv_count; begin += chunk) {
    const uint64_t n = std::min(chunk, recv_count - begin);
    step(
        "reduce_scatter",
        [&](char* mine) {
          for (int block = 0; block < size_; ++block)
            std::memcpy(mine + static_cast<uint64_t>(block) * n * e,
                        static_cast<const char*>(send) + (static_cast<uint64_t>(block) * recv_count + begin) * e,
                        n * e);
        },
        [&] {
          for (int r = 0; r < size_; ++r)
            inputs[static_cast<size_t>(r)] = slot(r) + static_cast<uint64_t>(rank_) * n * e;
          reduce(inputs, static_cast<char*>(recv) + begin * e, n, dtype, op);
        });
  }
}

void ShmComm::allgather(const void* send, void* recv, uint64_t send_count, uint32_t dtype, const Place* send_place) {
  const size_t e = collective_element_size(dtype);
  Buffers in_place;
  if (open_in_place("allgather", send_count * e * static_cast<uint64_t>(size_),
                    {.send = send, .send_place = send_place, .send_bytes = send_count * e, .recv = recv}, in_place)) {
    for (int r = 0; r < size_; ++r) {
      char* to = static_cast<char*>(recv) + static_cast<uint64_t>(r) * send_count * e;
      const char* from = in_place.sends[static_cast<size_t>(r)];
      if (to != from) std::memmove(to, from, send_count * e);
    }
    finish_in_place("allgather");
    return;
  }
  const uint64_t chunk = slot_bytes_ / e;
  for (uint64_t begin = 0; begin < send_count; begin += chunk) {
    const uint64_t n = std::min(chunk, send_count - begin);
    step(
        "allgather", [&](char* mine) { std::memcpy(mine, static_cast<const char*>(send) + begin * e, n * e); },
        [&] {
          for (int r = 0; r < size_; ++r) {
            char* to = static_cast<char*>(recv) + (static_cast<uint64_t>(r) * send_count + begin) * e;
            if (to != slot(r)) std::memmove(to, slot(r), n * e);
          }
        });
  }
}

void ShmComm::broadcast(const void* send, void* recv, uint64_t count, uint32_t dtype, int root,
                        const Place* send_place) {
  if (root < 0 || root >= size_)
    fail(H2_STATUS_INVALID_ARGUMENT, "root " + std::to_string(root) + " of " + std::to_string(size_) + " ranks");
  const size_t e = collective_element_size(dtype);
  Buffers in_place;
  if (open_in_place("broadcast", count * e,
                    {.send = send, .send_place = send_place, .send_bytes = count * e, .recv = recv, .send_from = root},
                    in_place)) {
    const char* from = in_place.sends[static_cast<size_t>(root)];
    if (from != recv) std::memmove(recv, from, count * e);
    finish_in_place("broadcast");
    return;
  }
  const uint64_t chunk = slot_bytes_ / e;
  for (uint64_t begin = 0; begin < count; begin += chunk) {
    const uint64_t n = std::min(chunk, count - begin);
    step(
        "broadcast",
        [&](char* mine) {
          if (rank_ == root) std::memcpy(mine, static_cast<const char*>(send) + begin * e, n * e);
        },
        [&] { std::memmove(static_cast<char*>(recv) + begin * e, slot(root), n * e); }, root);
  }
}

void ShmComm::exchange(std::vector<Transfer>& transfers) {
  check_aborted();
  for (const Transfer& t : transfers) check_peer(t.peer);
  // A message is a whole number of chunks, the last one short (or empty for an empty message).
  const auto chunks = [&](const Transfer& t) {
    return t.bytes == 0 ? 1 : (t.bytes + channel_bytes_ - 1) / channel_bytes_;
  };
  std::vector<uint64_t> chunks_done(transfers.size(), 0);
  const auto finished = [&](size_t i) { return chunks_done[i] == chunks(transfers[i]); };
  // Only the first unfinished transfer per (peer, direction) may move: messages stay in order.
  const auto first_of_its_kind = [&](size_t i) {
    for (size_t j = 0; j < i; ++j)
      if (transfers[j].peer == transfers[i].peer && transfers[j].send == transfers[i].send && !finished(j))
        return false;
    return true;
  };
  const auto progress = [&] {
    bool moved = false;
    for (size_t i = 0; i < transfers.size(); ++i) {
      if (finished(i) || !first_of_its_kind(i)) continue;
      Transfer& t = transfers[i];
      Channel& ch = t.send ? channel(rank_, t.peer) : channel(t.peer, rank_);
      char* data = t.send ? channel_data(rank_, t.peer) : channel_data(t.peer, rank_);
      const uint64_t n = std::min<uint64_t>(channel_bytes_, t.bytes - t.done);
      if (t.send && ch.written.load() == ch.read.load()) {  // the channel is empty
        if (n > 0) std::memcpy(data, static_cast<const char*>(t.from) + t.done, n);
        ch.written.fetch_add(1);
      } else if (!t.send && ch.written.load() != ch.read.load()) {
        if (n > 0) std::memcpy(static_cast<char*>(t.into) + t.done, data, n);
        ch.read.fetch_add(1);
      } else {
        continue;
      }
      t.done += n;
      ++chunks_done[i];
      moved = true;
    }
    if (moved) ring();
    return moved;
  };
  const auto all_finished = [&] {
    for (size_t i = 0; i < transfers.size(); ++i)
      if (!finished(i)) return false;
    return true;
  };
  while (!all_finished()) {
    if (progress()) continue;
    wait([&] { return progress() || all_finished(); },
         [&] {
           std::string what;
           for (size_t i = 0; i < transfers.size(); ++i)
             if (!finished(i))
               what += (what.empty() ? "" : ", ") + std::string(transfers[i].send ? "rank " : "a send from rank ") +
                       std::to_string(transfers[i].peer) + (transfers[i].send ? " to receive a message" : "");
           return what;
         });
  }
}

void ShmComm::abort(const std::string& reason) noexcept {
  mark_aborted(reason);
}

bool ShmComm::mark_aborted(const std::string& reason) noexcept {
  Control& c = control();
  uint32_t expected = 0;
  const bool first = c.aborted.compare_exchange_strong(expected, 2);  // 2: being written; check_aborted waits
  if (first) {
    c.aborted_by.store(rank_);
    const size_t n = std::min(reason.size(), sizeof c.reason - 1);
    std::memcpy(c.reason, reason.data(), n);
    c.reason[n] = '\0';
    c.aborted.store(1);
  }
  ring();
  return first;
}

}  // namespace h2::plugin
