#include "store_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/errno_text.hpp"
#include "h2/error.hpp"
#include "h2/log.hpp"
#include "store_protocol.hpp"

namespace h2::dicomm::detail {

namespace {

constexpr std::string_view kLogSource = "dicomm.store";
// How long a stopping server keeps trying to deliver what it queued (failure notices, the shutdown
// notice) to clients that do not read.
constexpr std::chrono::milliseconds kFinalFlush{1000};
// While accept() fails for want of file descriptors (EMFILE), the listener is left alone this long
// (it stays readable, and polling it again at once spun rank 0 at 100% CPU).
constexpr std::chrono::milliseconds kAcceptBackoff{100};

// Warnings about strangers (refused hellos, malformed or oversized frames, connections evicted or
// expired, failed accepts), at most one line per kind every 10 s with a count of those not logged:
// one line per wrong-token hello let anyone fill the log.
class RateLimitedWarnings {
 public:
  void warn(const std::string& kind, const std::string& message) {
    Entry& entry = entries_[kind];
    const Clock::time_point now = Clock::now();
    if (entry.logged && now - *entry.logged < std::chrono::seconds(10)) {
      ++entry.suppressed;
      return;
    }
    std::string line = message;
    if (entry.suppressed > 0)
      line += " (and " + std::to_string(entry.suppressed) + " more of this kind in the last 10 s, not logged)";
    log(LogLevel::warning, kLogSource, line);
    entry.logged = now;
    entry.suppressed = 0;
  }

 private:
  struct Entry {
    std::optional<Clock::time_point> logged;
    uint64_t suppressed = 0;
  };
  std::map<std::string, Entry> entries_;
};

std::string ms_text(int64_t ms) {
  return std::to_string(ms) + " ms";
}

// Compares without an early exit, so response time does not reveal how much of a token matched.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

struct StoreServer::Impl {
  struct Connection {
    Fd fd;
    std::string peer;  // "ip:port" of the client, for logs
    std::string in;
    std::string out;
    int rank = -1;  // set once welcomed
    bool close_after_flush = false;
    bool dead = false;
    Clock::time_point accepted_at = Clock::now();
  };
  enum class Phase { absent, connected, left, failed };
  struct RankState {
    Phase phase = Phase::absent;
    int pid = 0;
    std::string host;
    uint64_t connection = 0;
    std::string failure;
    Clock::time_point last_heard;  // the last frame from it
    // Its last ping: waiting for its peers (0 no, 1 yes, 2 unknown) for how long, and when.
    uint8_t waiting = 2;
    uint64_t in_state_ms = 0;
    Clock::time_point pinged;
  };
  struct Waiter {
    uint64_t connection;
    uint64_t request;
    int rank;
    Clock::time_point deadline;
    int64_t timeout_ms;
  };

  int world_size;
  std::string token;
  std::chrono::milliseconds stall_limit{0};
  RateLimitedWarnings warnings;
  Clock::time_point listener_paused_until;
  std::vector<Fd> listeners;  // one per address the master address resolves to
  int bound_port = 0;
  Fd wake_read, wake_write;
  std::thread thread;

  std::mutex stop_mutex;
  std::optional<Clock::time_point> stop_deadline;  // guarded by stop_mutex

  // Everything below belongs to the server thread.
  uint64_t next_connection = 1;
  std::map<uint64_t, Connection> connections;
  std::vector<RankState> ranks;
  std::vector<std::pair<int, std::string>> failures;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<Waiter>> gets;
  std::map<std::string, std::vector<Waiter>> barriers;

  std::string rank_text(int rank) const {
    const RankState& state = ranks[static_cast<size_t>(rank)];
    return "rank " + std::to_string(rank) + " (pid " + std::to_string(state.pid) + " on " + state.host + ")";
  }

  void queue(uint64_t id, const std::string& frame) {
    auto it = connections.find(id);
    if (it == connections.end() || it->second.dead) return;
    it->second.out += frame;
    flush(it->second);
  }

  void flush(Connection& c) {
    while (!c.out.empty() && !c.dead) {
      ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        c.dead = true;
        return;
      }
      c.out.erase(0, static_cast<size_t>(n));
    }
  }

  void reply(uint64_t connection, uint64_t request, bool ok, const std::string& text) {
    queue(connection, FrameWriter(MessageType::reply).u64(request).u8(ok ? 1 : 0).str(text).finish());
  }

  // Answers the waiters of a key, rank 0's own last (see handle_barrier).
  void answer_in_order(std::vector<Waiter>& waiters, const std::string& value) {
    std::stable_partition(waiters.begin(), waiters.end(), [](const Waiter& w) { return w.rank != 0; });
    for (const Waiter& w : waiters) reply(w.connection, w.request, true, value);
  }

  void fail_barriers(const std::string& why) {
    for (auto& [name, waiters] : barriers)
      for (const Waiter& w : waiters)
        reply(w.connection, w.request, false, "barrier '" + name + "' cannot complete: " + why);
    barriers.clear();
  }

  // The rank is gone for good: tell everyone else and fail what can no longer complete. A rank failed
  // while still connected (it stopped responding) is told too, and its connection closed, so that
  // should it resume it fails at once instead of waiting on peers that have given up on it.
  void fail_rank(int rank, const std::string& reason) {
    RankState& state = ranks[static_cast<size_t>(rank)];
    state.phase = Phase::failed;
    state.failure = reason;
    failures.emplace_back(rank, reason);
    log(LogLevel::warning, kLogSource, rank_text(rank) + " failed: " + reason);
    std::string notice = FrameWriter(MessageType::failure).i32(rank).str(reason).finish();
    for (auto& [id, c] : connections) {
      if (c.rank < 0) continue;
      if (c.rank == rank && id == state.connection && !c.dead) {
        queue(id, notice);
        c.close_after_flush = true;
      } else if (c.rank != rank && ranks[static_cast<size_t>(c.rank)].phase == Phase::connected) {
        queue(id, notice);
      }
    }
    fail_barriers("rank " + std::to_string(rank) + " failed (" + reason + ")");
    fail_gets();
  }

  // A failed rank fails the job (every rank's DiComm stops), so a key nobody has set yet would be
  // waited for until the timeout: the ranks waiting for one are told why at once instead.
  void fail_gets() {
    for (auto& [key, waiters] : gets)
      for (const Waiter& w : waiters) reply(w.connection, w.request, false, *get_refusal(key));
    gets.clear();
  }

  // Why a get of the unset `key` fails at once: the rank that failed first (a later failure may be a
  // knock-on effect of it); nothing while no rank has failed.
  std::optional<std::string> get_refusal(const std::string& key) const {
    if (failures.empty()) return std::nullopt;
    const auto& [rank, reason] = failures.front();
    return "key '" + key + "' is not set and rank " + std::to_string(rank) + " failed (" + reason + ")";
  }

  // Why no barrier can complete any more, or nothing.
  std::optional<std::string> barrier_blocker() const {
    for (int r = 0; r < world_size; ++r) {
      const RankState& state = ranks[static_cast<size_t>(r)];
      if (state.phase == Phase::failed) return "rank " + std::to_string(r) + " failed (" + state.failure + ")";
      if (state.phase == Phase::left) return "rank " + std::to_string(r) + " has closed its store connection";
    }
    return std::nullopt;
  }

  void refuse(uint64_t id, Connection& c, const std::string& who, const std::string& reason) {
    warnings.warn("refused", "refused " + who + " from " + c.peer + ": " + reason);
    queue(id, FrameWriter(MessageType::refused).str(reason).finish());
    c.close_after_flush = true;
  }

  void handle_hello(uint64_t id, Connection& c, FrameReader& in) {
    uint32_t magic = in.u32();
    uint16_t version = in.u16();
    if (magic != kStoreMagic) throw ProtocolError("not an H2 rendezvous client");
    if (version != kStoreProtocolVersion) {
      refuse(id, c, "a client",
             "protocol version " + std::to_string(version) + " (this store speaks " +
                 std::to_string(kStoreProtocolVersion) + "; mixed H2 builds in one job?)");
      return;
    }
    std::string client_token = in.str();
    int rank = in.i32();
    int client_world = in.i32();
    int pid = in.i32();
    std::string host = in.str();
    std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + " on " + host + ")";
    if (!same_token(client_token, token)) return refuse(id, c, who, "wrong job token (H2_JOB_TOKEN)");
    if (client_world != world_size)
      return refuse(id, c, who,
                    "its world size " + std::to_string(client_world) + " differs from the store's world size " +
                        std::to_string(world_size));
    if (rank < 0 || rank >= world_size)
      return refuse(id, c, who,
                    "rank " + std::to_string(rank) + " is not below the world size " + std::to_string(world_size));
    RankState& state = ranks[static_cast<size_t>(rank)];
    switch (state.phase) {
      case Phase::absent: break;
      case Phase::connected: return refuse(id, c, who, "duplicate rank: " + rank_text(rank) + " is already connected");
      case Phase::left: return refuse(id, c, who, "rank " + std::to_string(rank) + " already closed DiComm");
      case Phase::failed:
        return refuse(id, c, who, "rank " + std::to_string(rank) + " already failed: " + state.failure);
    }
    state = RankState{Phase::connected, pid, host, id, {}, Clock::now()};
    c.rank = rank;
    log(LogLevel::debug, kLogSource, who + " joined from " + c.peer);
    queue(
        id,
        FrameWriter(MessageType::welcome).u32(static_cast<uint32_t>(heartbeat_interval(stall_limit).count())).finish());
    // A rank that joins late still learns of failures that happened before it arrived.
    for (const auto& [failed, reason] : failures)
      queue(id, FrameWriter(MessageType::failure).i32(failed).str(reason).finish());
  }

  void handle_barrier(uint64_t id, int rank, uint64_t request, const std::string& name, int64_t timeout_ms) {
    if (auto blocker = barrier_blocker()) {
      reply(id, request, false, "barrier '" + name + "' cannot complete: " + *blocker);
      return;
    }
    std::vector<Waiter>& waiters = barriers[name];
    for (const Waiter& w : waiters)
      if (w.rank == rank) {
        reply(id, request, false, "rank " + std::to_string(rank) + " is already waiting in barrier '" + name + "'");
        return;
      }
    waiters.push_back(Waiter{id, request, rank, Clock::now() + std::chrono::milliseconds(timeout_ms), timeout_ms});
    if (static_cast<int>(waiters.size()) < world_size) return;
    // Rank 0's own connection last: the server runs inside rank 0, and a rank 0 that exits as soon as
    // its barrier returns would otherwise take the other ranks' answers down with it.
    std::stable_partition(waiters.begin(), waiters.end(), [](const Waiter& w) { return w.rank != 0; });
    for (const Waiter& w : waiters) reply(w.connection, w.request, true, {});
    barriers.erase(name);
  }

  void handle_request(uint64_t id, Connection& c, MessageType type, FrameReader& in) {
    uint64_t request = in.u64();
    switch (type) {
      case MessageType::set: {
        std::string key = in.str();
        std::string value = in.str();
        auto waiting = gets.find(key);
        if (waiting != gets.end()) {
          answer_in_order(waiting->second, value);
          gets.erase(waiting);
        }
        values[key] = std::move(value);
        reply(id, request, true, {});
        return;
      }
      case MessageType::get: {
        std::string key = in.str();
        int64_t timeout_ms = in.i64();
        auto found = values.find(key);
        if (found != values.end()) return reply(id, request, true, found->second);
        if (const std::optional<std::string> refusal = get_refusal(key)) return reply(id, request, false, *refusal);
        gets[key].push_back(
            Waiter{id, request, c.rank, Clock::now() + std::chrono::milliseconds(timeout_ms), timeout_ms});
        return;
      }
      case MessageType::add: {
        std::string key = in.str();
        int64_t delta = in.i64();
        int64_t current = 0;
        auto found = values.find(key);
        if (found != values.end()) {
          const std::string& text = found->second;
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
          if (ec != std::errc() || end != text.data() + text.size())
            return reply(id, request, false, "key '" + key + "' holds '" + text + "', not an integer");
        }
        int64_t sum = 0;
        if (__builtin_add_overflow(current, delta, &sum))
          return reply(id, request, false, "adding " + std::to_string(delta) + " to key '" + key + "' overflows");
        std::string value = std::to_string(sum);
        auto waiting = gets.find(key);
        if (waiting != gets.end()) {
          answer_in_order(waiting->second, value);
          gets.erase(waiting);
        }
        values[key] = value;
        return reply(id, request, true, value);
      }
      case MessageType::barrier: {
        std::string name = in.str();
        int64_t timeout_ms = in.i64();
        return handle_barrier(id, c.rank, request, name, timeout_ms);
      }
      case MessageType::abort: {
        std::string reason = in.str();
        if (ranks[static_cast<size_t>(c.rank)].phase == Phase::connected) fail_rank(c.rank, "aborted: " + reason);
        return reply(id, request, true, {});
      }
      case MessageType::activity: {
        std::string lines;
        const Clock::time_point now = Clock::now();
        for (int r = 0; r < world_size; ++r) {
          const RankState& state = ranks[static_cast<size_t>(r)];
          const bool pinged = state.pinged != Clock::time_point();
          const auto since =
              pinged ? std::chrono::duration_cast<std::chrono::milliseconds>(now - state.pinged).count() : 0;
          lines += std::to_string(r) + " " + (state.phase == Phase::connected ? "1" : "0") + " " +
                   std::to_string(pinged ? state.waiting : 2) + " " + std::to_string(state.in_state_ms) + " " +
                   std::to_string(since) + "\n";
        }
        return reply(id, request, true, lines);
      }
      case MessageType::goodbye: {
        RankState& state = ranks[static_cast<size_t>(c.rank)];
        if (state.phase == Phase::connected) {
          state.phase = Phase::left;
          log(LogLevel::debug, kLogSource, rank_text(c.rank) + " closed");
          fail_barriers("rank " + std::to_string(c.rank) + " has closed its store connection");
        }
        reply(id, request, true, {});
        c.close_after_flush = true;
        return;
      }
      default: throw ProtocolError("unexpected message type " + std::to_string(static_cast<int>(type)));
    }
  }

  void handle_frame(uint64_t id, Connection& c, std::string_view payload) {
    FrameReader in(payload);
    MessageType type = in.type();
    if (c.close_after_flush) return;  // refused or said goodbye: nothing more is served
    if (c.rank < 0) {
      if (type != MessageType::hello) throw ProtocolError("the first message is not a hello");
      return handle_hello(id, c, in);
    }
    ranks[static_cast<size_t>(c.rank)].last_heard = Clock::now();
    if (type == MessageType::ping) {
      RankState& state = ranks[static_cast<size_t>(c.rank)];
      state.waiting = std::min<uint8_t>(in.u8(), 2);
      state.in_state_ms = in.u64();
      state.pinged = state.last_heard;
      return queue(id, FrameWriter(MessageType::pong).finish());
    }
    handle_request(id, c, type, in);
  }

  void read_from(uint64_t id, Connection& c) {
    char buffer[65536];
    while (!c.dead) {
      // Before its welcome a connection gets no more buffer than a hello needs.
      const size_t room =
          c.rank < 0 ? kMaxHelloBytes + 4 - std::min<size_t>(c.in.size(), kMaxHelloBytes + 4) : sizeof(buffer);
      if (room == 0) break;
      ssize_t n = ::recv(c.fd.get(), buffer, std::min(room, sizeof(buffer)), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {
        c.dead = true;
        break;
      }
      // Any bytes count as a sign of life: a ping may be queued behind a large frame still arriving.
      if (c.rank >= 0) ranks[static_cast<size_t>(c.rank)].last_heard = Clock::now();
      c.in.append(buffer, static_cast<size_t>(n));
    }
    size_t offset = 0;
    try {
      while (c.in.size() - offset >= 4) {
        uint32_t length = frame_length(c.in.data() + offset);
        if (length == 0 || length > (c.rank < 0 ? kMaxHelloBytes : kMaxFrameBytes))
          throw ProtocolError("frame of " + std::to_string(length) + " bytes" +
                              (c.rank < 0 ? " before the welcome" : ""));
        if (c.in.size() - offset - 4 < length) break;
        handle_frame(id, c, std::string_view(c.in).substr(offset + 4, length));
        offset += 4 + length;
      }
    } catch (const ProtocolError& e) {
      warnings.warn("malformed", "dropping the connection from " + c.peer +
                                     (c.rank >= 0 ? " (rank " + std::to_string(c.rank) + ")" : "") +
                                     ": malformed message (" + e.what() + ")");
      c.dead = true;
    }
    c.in.erase(0, offset);
  }

  void drop(uint64_t id) {
    auto it = connections.find(id);
    Connection& c = it->second;
    if (c.rank >= 0) {
      RankState& state = ranks[static_cast<size_t>(c.rank)];
      if (state.connection == id && state.phase == Phase::connected)
        fail_rank(c.rank, "the process (pid " + std::to_string(state.pid) + " on " + state.host +
                              ") exited without closing DiComm (its connection to the rendezvous store closed)");
    }
    for (auto* table : {&gets, &barriers})
      for (auto& [name, waiters] : *table) std::erase_if(waiters, [id](const Waiter& w) { return w.connection == id; });
    std::erase_if(gets, [](const auto& entry) { return entry.second.empty(); });
    std::erase_if(barriers, [](const auto& entry) { return entry.second.empty(); });
    connections.erase(it);
  }

  // The oldest connection that has not been welcomed, or none.
  std::optional<uint64_t> oldest_unwelcomed() const {
    std::optional<uint64_t> oldest;
    for (const auto& [id, c] : connections)
      if (c.rank < 0 && !c.dead && (!oldest || c.accepted_at < connections.at(*oldest).accepted_at)) oldest = id;
    return oldest;
  }

  size_t unwelcomed() const {
    return static_cast<size_t>(
        std::count_if(connections.begin(), connections.end(), [](const auto& e) { return e.second.rank < 0; }));
  }

  void accept_all(int listener_fd) {
    // At most 64 a turn: a flood of connections must not keep the loop from reading the ranks' pings.
    for (int accepted = 0; accepted < 64; ++accepted) {
      SocketAddress peer;
      peer.length = sizeof(peer.storage);
      int fd = ::accept4(listener_fd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: make room by dropping the oldest stranger, else (or out of memory,
          // which dropping does not cure) leave the listener alone for a while (it stays readable:
          // polling it again at once spins).
          const int error = errno;
          if (error == EMFILE || error == ENFILE) {
            if (auto oldest = oldest_unwelcomed()) {
              drop(*oldest);
              continue;
            }
          }
          listener_paused_until = Clock::now() + kAcceptBackoff;
          warnings.warn("accept", "accept failed: " + errno_text(error) + "; not accepting for " +
                                      std::to_string(kAcceptBackoff.count()) + " ms");
          return;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) warnings.warn("accept", "accept failed: " + errno_text(errno));
        return;
      }
      set_nodelay(fd);
      Connection c;
      c.fd.reset(fd);
      c.peer = join_host_port(peer.ip(), peer.port());
      connections.emplace(next_connection++, std::move(c));
      // A flood of connections that never say hello costs at most kMaxUnwelcomed descriptors: the
      // oldest goes (a rank says hello at once, so it is rarely a rank).
      if (unwelcomed() > kMaxUnwelcomed) {
        const uint64_t oldest = *oldest_unwelcomed();
        warnings.warn("evicted", "more than " + std::to_string(kMaxUnwelcomed) +
                                     " connections without a hello: dropping the oldest, from " +
                                     connections.at(oldest).peer);
        drop(oldest);
      }
    }
  }

  // Strangers that have not said hello within kHelloDeadline, and ranks silent for the stall limit.
  void expire_connections(Clock::time_point now) {
    for (auto& [id, c] : connections)
      if (c.rank < 0 && !c.dead && now - c.accepted_at >= kHelloDeadline) {
        warnings.warn("expired", "dropping the connection from " + c.peer + ": no hello within " +
                                     std::to_string(kHelloDeadline.count()) + " ms");
        c.dead = true;
      }
    for (int r = 0; r < world_size; ++r) {
      const RankState& state = ranks[static_cast<size_t>(r)];
      if (state.phase != Phase::connected || now - state.last_heard < stall_limit) continue;
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - state.last_heard);
      fail_rank(r,
                "stopped responding: the rendezvous store has heard nothing from it (not even its heartbeat) "
                "for " +
                    ms_text(silent.count()) +
                    " (a stopped process, e.g. SIGSTOP, or one whose DiComm threads hang; H2_DICOMM_TIMEOUT "
                    "sets the limit)");
    }
  }

  // When expire_connections next has something to do.
  Clock::time_point next_expiry() const {
    Clock::time_point next = Clock::time_point::max();
    for (const auto& [id, c] : connections)
      if (c.rank < 0 && !c.dead) next = std::min(next, c.accepted_at + kHelloDeadline);
    for (const RankState& state : ranks)
      if (state.phase == Phase::connected) next = std::min(next, state.last_heard + stall_limit);
    return next;
  }

  void expire_waiters(Clock::time_point now) {
    for (auto it = gets.begin(); it != gets.end();) {
      auto& waiters = it->second;
      for (const Waiter& w : waiters)
        if (w.deadline <= now)
          reply(w.connection, w.request, false,
                "timed out after " + ms_text(w.timeout_ms) + " waiting for key '" + it->first + "' to be set");
      std::erase_if(waiters, [now](const Waiter& w) { return w.deadline <= now; });
      it = waiters.empty() ? gets.erase(it) : std::next(it);
    }
    for (auto it = barriers.begin(); it != barriers.end();) {
      auto& waiters = it->second;
      bool expired = std::any_of(waiters.begin(), waiters.end(), [now](const Waiter& w) { return w.deadline <= now; });
      if (expired) {
        std::set<int> arrived;
        for (const Waiter& w : waiters) arrived.insert(w.rank);
        std::string missing;
        for (int r = 0; r < world_size; ++r)
          if (!arrived.contains(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        for (const Waiter& w : waiters)
          if (w.deadline <= now)
            reply(w.connection, w.request, false,
                  "barrier '" + it->first + "' timed out after " + ms_text(w.timeout_ms) + ": rank(s) " + missing +
                      " did not arrive");
        std::erase_if(waiters, [now](const Waiter& w) { return w.deadline <= now; });
      }
      it = waiters.empty() ? barriers.erase(it) : std::next(it);
    }
  }

  Clock::time_point next_deadline() const {
    Clock::time_point next = Clock::time_point::max();
    for (const auto* table : {&gets, &barriers})
      for (const auto& [name, waiters] : *table)
        for (const Waiter& w : waiters) next = std::min(next, w.deadline);
    return next;
  }

  bool everyone_done() const {
    return std::all_of(ranks.begin(), ranks.end(),
                       [](const RankState& s) { return s.phase == Phase::left || s.phase == Phase::failed; });
  }

  // Tells the ranks still here that the store is going away and gives the notices a moment to leave.
  void finish(bool waited, Clock::time_point stop_requested_at, Clock::time_point deadline) {
    int64_t waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - stop_requested_at).count();
    std::string why = waited ? "rank 0 closed the rendezvous store after waiting " +
                                   ms_text(std::max<int64_t>(waited_ms, 0)) + " for the other ranks to close"
                             : "rank 0 stopped the rendezvous store";
    std::string notice = FrameWriter(MessageType::shutdown).str(why).finish();
    for (auto& [id, c] : connections)
      if (c.rank >= 0 && ranks[static_cast<size_t>(c.rank)].phase == Phase::connected) queue(id, notice);
    Clock::time_point flush_deadline = Clock::now() + kFinalFlush;
    while (Clock::now() < flush_deadline) {
      std::vector<pollfd> fds;
      for (auto& [id, c] : connections)
        if (!c.dead && !c.out.empty()) fds.push_back(pollfd{c.fd.get(), POLLOUT, 0});
      if (fds.empty()) break;
      ::poll(fds.data(), fds.size(), 50);
      for (auto& [id, c] : connections) flush(c);
    }
    connections.clear();
  }

  void run() {
    std::optional<Clock::time_point> stop_requested_at;
    while (true) {
      std::optional<Clock::time_point> stop;
      {
        std::lock_guard lock(stop_mutex);
        stop = stop_deadline;
      }
      Clock::time_point now = Clock::now();
      if (stop) {
        if (!stop_requested_at) stop_requested_at = now;
        bool done = everyone_done();
        if (done || now >= *stop) {
          finish(!done && *stop > *stop_requested_at, *stop_requested_at, *stop);
          return;
        }
      }

      std::vector<pollfd> fds;
      std::vector<uint64_t> ids;
      fds.push_back(pollfd{wake_read.get(), POLLIN, 0});
      // A negative descriptor is ignored by poll: the listeners rest while accept lacks descriptors.
      for (const Fd& listener : listeners)
        fds.push_back(pollfd{now < listener_paused_until ? -1 : listener.get(), POLLIN, 0});
      const size_t first_connection = 1 + listeners.size();
      for (auto& [id, c] : connections) {
        short events = POLLIN;
        if (!c.out.empty()) events |= POLLOUT;
        fds.push_back(pollfd{c.fd.get(), events, 0});
        ids.push_back(id);
      }
      Clock::time_point wake_at = std::min(next_deadline(), next_expiry());
      if (now < listener_paused_until) wake_at = std::min(wake_at, listener_paused_until);
      if (stop) wake_at = std::min(wake_at, *stop);
      int timeout_ms = -1;
      if (wake_at != Clock::time_point::max()) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
      }
      int rc = ::poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0 && errno != EINTR) {
        log(LogLevel::error, kLogSource, "poll failed: " + errno_text(errno));
        return;
      }
      if (rc > 0) {
        if (fds[0].revents != 0) {
          char drain[64];
          while (::read(wake_read.get(), drain, sizeof(drain)) > 0) {
          }
        }
        for (size_t l = 0; l < listeners.size(); ++l)
          if (fds[1 + l].revents & POLLIN) accept_all(listeners[l].get());
        for (size_t i = 0; i < ids.size(); ++i) {
          short revents = fds[first_connection + i].revents;
          auto it = connections.find(ids[i]);
          if (it == connections.end() || revents == 0) continue;
          if (revents & POLLOUT) flush(it->second);
          if (revents & (POLLIN | POLLHUP | POLLERR)) read_from(ids[i], it->second);
        }
      }
      expire_waiters(Clock::now());
      expire_connections(Clock::now());
      std::vector<uint64_t> finished;
      for (auto& [id, c] : connections)
        if (c.dead || (c.close_after_flush && c.out.empty())) finished.push_back(id);
      for (uint64_t id : finished) drop(id);
    }
  }

  void request_stop(Clock::time_point deadline) {
    {
      std::lock_guard lock(stop_mutex);
      if (!stop_deadline || deadline < *stop_deadline) stop_deadline = deadline;
    }
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_write.get(), &byte, 1);
  }
};

StoreServer::StoreServer(const std::string& host, int port, int world_size, std::string token,
                         std::chrono::milliseconds stall_limit)
    : impl_(std::make_unique<Impl>()) {
  impl_->world_size = world_size;
  impl_->token = std::move(token);
  impl_->stall_limit = stall_limit;
  impl_->ranks.resize(static_cast<size_t>(world_size));

  std::string where = join_host_port(host, port);
  std::string error;
  std::vector<SocketAddress> addresses = resolve(host, port, error);
  if (addresses.empty())
    throw Error(H2_STATUS_INVALID_ARGUMENT, "rank 0 cannot start the rendezvous store at " + where + ": " + error);
  // Where the ranks connect: the addresses `host` resolves to, without loopback ones when it has
  // others (a strange host that reaches the store can only waste its hello, but it need not reach it).
  std::vector<SocketAddress> candidates;
  std::copy_if(addresses.begin(), addresses.end(), std::back_inserter(candidates),
               [](const SocketAddress& a) { return !a.is_loopback(); });
  if (candidates.empty()) candidates = addresses;  // a local job: loopback only
  const char* any = std::getenv("H2_STORE_LISTEN_ANY");
  const bool everywhere = any != nullptr && std::string(any) == "1";
  if (everywhere)  // for peers that reach this host by another address; the dual-stack one covers both
    candidates = {wildcard_address(AF_INET6, port), wildcard_address(AF_INET, port)};
  std::string errors;
  for (const SocketAddress& candidate : candidates) {
    SocketAddress address = candidate;
    if (!impl_->listeners.empty() && port == 0) {  // every address on the port the first one got
      std::string ignored;
      const std::vector<SocketAddress> again = resolve(candidate.ip(), impl_->bound_port, ignored);
      if (again.empty()) continue;
      address = again.front();
    }
    Fd fd = listen_on(address, std::max(128, world_size), error);
    if (!fd.valid()) {
      errors += (errors.empty() ? "" : "; ") + join_host_port(address.ip(), address.port()) + ": " + error;
      continue;
    }
    set_nonblocking(fd.get());
    if (impl_->listeners.empty()) impl_->bound_port = local_address_of(fd.get()).port();
    impl_->listeners.push_back(std::move(fd));
    if (everywhere) break;
  }
  if (impl_->listeners.empty()) {
    std::string hint;
    if (errors.find("Address already in use") != std::string::npos)
      hint =
          " (another process holds the port; under torchrun the agent's own store may use MASTER_PORT: set "
          "H2_MASTER_PORT to a free port)";
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "rank 0 cannot listen for the rendezvous store at " + where + ": " + errors + hint);
  }
  if (!errors.empty()) log(LogLevel::debug, kLogSource, "the rendezvous store does not listen on " + errors);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(H2_STATUS_INTERNAL, "rendezvous store: pipe2 failed: " + errno_text(errno));
  impl_->wake_read.reset(pipe_fds[0]);
  impl_->wake_write.reset(pipe_fds[1]);
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->run();
    } catch (const std::exception& e) {
      // The clients see their connections close and report rank 0's store as gone.
      log(LogLevel::error, kLogSource, std::string("the rendezvous store stopped: ") + e.what());
      impl->connections.clear();
    }
  });
}

StoreServer::~StoreServer() {
  stop(Clock::now());
}

int StoreServer::port() const {
  return impl_->bound_port;
}

void StoreServer::stop(Clock::time_point deadline) {
  if (!impl_->thread.joinable()) return;
  impl_->request_stop(deadline);
  impl_->thread.join();
  impl_->listeners.clear();
}

}  // namespace h2::dicomm::detail
