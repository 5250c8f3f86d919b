#include "h2/dicomm/store.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "h2/error.hpp"
#include "h2/log.hpp"
#include "pmix_bootstrap.hpp"
#include "socket.hpp"
#include "store_protocol.hpp"
#include "store_server.hpp"

namespace h2::dicomm {

namespace {

using detail::Clock;
using detail::FrameReader;
using detail::FrameWriter;
using detail::MessageType;

constexpr std::string_view kLogSource = "dicomm.store";
// Extra time a client waits beyond its own timeout for the server's answer to a get or barrier, so
// that the server's own timeout message (which names the key) normally wins.
constexpr std::chrono::milliseconds kReplyGrace{2000};

std::string ms_text(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

std::string random_token() {
  std::random_device device;
  std::string token;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    uint32_t word = device();
    for (int j = 0; j < 4; ++j) {
      token += hex[(word >> 4) & 15];
      token += hex[word & 15];
      word >>= 8;
    }
  }
  return token;
}

// Reads one frame from a blocking socket; nothing on EOF, error or receive timeout.
std::optional<std::string> read_frame(int fd) {
  char prefix[4];
  if (!detail::recv_all(fd, prefix, 4)) return std::nullopt;
  uint32_t length = detail::frame_length(prefix);
  if (length == 0 || length > detail::kMaxFrameBytes) return std::nullopt;
  std::string payload(length, '\0');
  if (!detail::recv_all(fd, payload.data(), length)) return std::nullopt;
  return payload;
}

// A rank the store has not heard from for this share of the timeout is failed (and a rank that has not
// heard from the store for as long reports rank 0): a stopped rank is then named within the timeout,
// before the operations waiting on it time out naming the peer they wait for, which may be alive.
std::chrono::milliseconds stall_limit_of(std::chrono::milliseconds timeout) {
  return std::max(timeout * 9 / 10, std::chrono::milliseconds(100));
}

class TcpStore final : public Store {
 public:
  TcpStore(const RankInfo& info, std::chrono::milliseconds timeout)
      : info_(info),
        timeout_(timeout),
        stall_limit_(stall_limit_of(timeout)),
        ping_interval_(detail::heartbeat_interval(stall_limit_)) {}

  ~TcpStore() override {
    // A destructor is a clean exit unless the rank aborted; only a process that dies without
    // running destructors counts as failed for the others.
    close();
  }

  void start(std::unique_ptr<detail::StoreServer> server) {
    server_ = std::move(server);
    Clock::time_point deadline = Clock::now() + timeout_;
    address_ = detail::join_host_port(info_.master_addr, info_.master_port);
    connect_until(deadline);
    heard();
    reader_ = std::thread([this] { read_loop(); });
    heartbeat_ = std::thread([this] { heartbeat_loop(); });
  }

  int rank() const override { return info_.rank; }
  int world_size() const override { return info_.world_size; }
  std::string address() const override { return address_; }
  std::string local_address() const override { return local_address_; }

  void set(const std::string& key, const std::string& value) override {
    call(
        "set('" + key + "')", [&](uint64_t id) { return FrameWriter(MessageType::set).u64(id).str(key).str(value); },
        timeout_);
  }

  std::string get(const std::string& key) override {
    return call(
        "get('" + key + "')",
        [&](uint64_t id) { return FrameWriter(MessageType::get).u64(id).str(key).i64(timeout_.count()); },
        timeout_ + kReplyGrace);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::string text = call(
        "add('" + key + "')", [&](uint64_t id) { return FrameWriter(MessageType::add).u64(id).str(key).i64(delta); },
        timeout_);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
      throw Error(H2_STATUS_INTERNAL, "rendezvous store answered add('" + key + "') with '" + text + "'");
    return value;
  }

  void barrier(const std::string& name) override { barrier_within(name, timeout_); }

  void barrier_within(const std::string& name, std::chrono::milliseconds limit) override {
    const std::chrono::milliseconds wait = std::min(limit, timeout_);
    call(
        "barrier('" + name + "')",
        [&](uint64_t id) { return FrameWriter(MessageType::barrier).u64(id).str(name).i64(wait.count()); },
        wait + kReplyGrace);
  }

  void report_wait_state(std::function<WaitState()> source) override {
    std::lock_guard lock(wait_state_mutex_);  // held while the heartbeat calls it
    wait_state_ = std::move(source);
  }

  std::vector<RankActivity> activity() override {
    const std::string text = call(
        "activity", [&](uint64_t id) { return FrameWriter(MessageType::activity).u64(id); }, timeout_);
    std::vector<RankActivity> ranks;
    std::istringstream lines(text);
    int rank = 0, connected = 0, waiting = 0;
    int64_t in_state = 0, since = 0;
    while (lines >> rank >> connected >> waiting >> in_state >> since) {
      RankActivity a;
      a.rank = rank;
      a.connected = connected == 1;
      a.reported = waiting != 2;
      a.waiting = waiting == 1;
      a.in_state = std::chrono::milliseconds(in_state);
      a.heard_ago = std::chrono::milliseconds(since);
      ranks.push_back(a);
    }
    return ranks;
  }

  void on_failure(std::function<void(const RankFailure&)> handler) override {
    std::optional<RankFailure> already;
    {
      std::unique_lock lock(mutex_);
      handler_ = std::move(handler);
      if (failure_ && !handler_called_ && handler_) {
        handler_called_ = true;
        already = failure_;
      }
      // Cleared: a call already running on the store's threads finishes first, since its owner is
      // about to go (ThreadSanitizer saw the World free its engine under a running handler).
      if (!handler_) cv_.wait(lock, [&] { return handlers_running_ == 0; });
    }
    if (already) invoke(*already);
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mutex_);
      if (closed_ || aborted_) return;
      aborted_ = true;
    }
    // Waiting for the acknowledgement makes sure the notice left this process before it exits.
    try {
      call(
          "abort", [&](uint64_t id) { return FrameWriter(MessageType::abort).u64(id).str(reason); }, timeout_);
    } catch (const Error& e) {
      log(LogLevel::warning, kLogSource,
          "rank " + std::to_string(info_.rank) + " could not report its abort: " + e.what());
    }
  }

  void close() override {
    Clock::time_point deadline = Clock::now() + timeout_;
    bool say_goodbye = false;
    bool was_aborted = false;
    {
      std::lock_guard lock(mutex_);
      if (closing_) return;
      if ((reader_.joinable() && std::this_thread::get_id() == reader_.get_id()) ||
          (heartbeat_.joinable() && std::this_thread::get_id() == heartbeat_.get_id())) {
        // Joining the reader from itself would deadlock; close() belongs outside the handler.
        log(LogLevel::error, kLogSource, "Store::close() called from the failure handler; ignored");
        return;
      }
      closing_ = true;
      say_goodbye = !aborted_ && !lost_ && reader_.joinable();
      was_aborted = aborted_;
    }
    if (say_goodbye) {
      try {
        call(
            "close", [&](uint64_t id) { return FrameWriter(MessageType::goodbye).u64(id); }, timeout_);
      } catch (const Error& e) {
        log(LogLevel::info, kLogSource, "rank " + std::to_string(info_.rank) + " could not say goodbye: " + e.what());
      }
    }
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
    if (socket_.valid()) ::shutdown(socket_.get(), SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    {
      std::lock_guard lock(send_mutex_);
      socket_.reset();
    }
    if (server_) {
      // A rank 0 that never got its own connection (or aborted) has nobody to wait for; nor has one
      // that saw another rank fail: every rank has been told, and one that hangs would never say
      // goodbye, keeping this process (and its own error message) for the whole timeout.
      bool connected = say_goodbye, failure_seen = false;
      {
        std::lock_guard lock(mutex_);
        failure_seen = failure_.has_value();
      }
      server_->stop(was_aborted || !connected || failure_seen ? Clock::now() : deadline);
      server_.reset();
    }
  }

 private:
  void connect_until(Clock::time_point deadline) {
    auto backoff = std::chrono::milliseconds(10);
    std::string last_error;
    while (true) {
      std::vector<detail::SocketAddress> addresses = detail::resolve(info_.master_addr, info_.master_port, last_error);
      for (const detail::SocketAddress& address : addresses) {
        std::string error;
        detail::Fd fd = detail::connect_before(address, deadline, error);
        if (!fd.valid()) {
          // The attempt the deadline cut short says less than the refusal before it.
          if (last_error.empty() || error != detail::kConnectTimedOut) last_error = address.ip() + ": " + error;
          continue;
        }
        if (handshake(fd, deadline, last_error)) {
          socket_ = std::move(fd);
          return;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      std::this_thread::sleep_for(std::min(backoff, left));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
    throw Error(H2_STATUS_DEVICE_ERROR, "rank " + std::to_string(info_.rank) +
                                            " could not connect to the rendezvous store at " + address_ + " within " +
                                            ms_text(timeout_) + ": " + last_error + " (" + info_.describe() + ")");
  }

  // Says hello; true when welcomed. Throws when refused: retrying cannot help.
  bool handshake(detail::Fd& fd, Clock::time_point deadline, std::string& error) {
    detail::set_nodelay(fd.get());
    std::string hello = FrameWriter(MessageType::hello)
                            .u32(detail::kStoreMagic)
                            .u16(detail::kStoreProtocolVersion)
                            .str(info_.token)
                            .i32(info_.rank)
                            .i32(info_.world_size)
                            .i32(static_cast<int32_t>(::getpid()))
                            .str(host_name())
                            .finish();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    detail::set_io_timeouts(fd.get(), std::max(left, std::chrono::milliseconds(1)), timeout_);
    if (!detail::send_all(fd.get(), hello.data(), hello.size())) {
      error = "the connection closed during the hello";
      return false;
    }
    std::optional<std::string> answer = read_frame(fd.get());
    if (!answer) {
      error = Clock::now() >= deadline ? "no answer to the hello (is another service listening on that port?)"
                                       : "the connection closed during the hello";
      return false;
    }
    try {
      FrameReader in(*answer);
      MessageType type = in.type();
      if (type == MessageType::refused)
        throw Error(H2_STATUS_INVALID_ARGUMENT, "rendezvous store at " + address_ + " refused rank " +
                                                    std::to_string(info_.rank) + ": " + in.str());
      if (type != MessageType::welcome) {
        error = "unexpected answer to the hello";
        return false;
      }
      // The store's heartbeat interval: every rank pings at the pace of the store's stall limit,
      // whatever its own H2_DICOMM_TIMEOUT says.
      ping_interval_ = std::chrono::milliseconds(in.u32());
    } catch (const detail::ProtocolError& e) {
      error = std::string("malformed answer to the hello: ") + e.what();
      return false;
    }
    // From here on the reader thread blocks without a limit and send() is bounded by the timeout.
    detail::set_io_timeouts(fd.get(), std::chrono::milliseconds(0), timeout_);
    local_address_ = detail::local_address_of(fd.get()).ip();
    return true;
  }

  template <typename Build>
  std::string call(const std::string& what, Build build, std::chrono::milliseconds wait) {
    uint64_t id = 0;
    {
      std::lock_guard lock(mutex_);
      if (closed_ || (closing_ && what != "close"))
        throw Error(H2_STATUS_INVALID_ARGUMENT, "Store::" + what + " after close()");
      if (lost_) throw lost_error(what);
      id = next_id_++;
    }
    FrameWriter frame = build(id);
    const std::string& bytes = frame.finish();
    bool sent = false;
    {
      std::lock_guard lock(send_mutex_);
      sent = socket_.valid() && detail::send_all(socket_.get(), bytes.data(), bytes.size());
    }
    std::unique_lock lock(mutex_);
    if (!sent) {
      connection_lost_locked("sending failed");
      throw lost_error(what);
    }
    Clock::time_point deadline = Clock::now() + wait;
    cv_.wait_until(lock, deadline, [&] { return replies_.contains(id) || lost_ || closed_; });
    auto found = replies_.find(id);
    if (found == replies_.end()) {
      if (lost_ || closed_) throw lost_error(what);
      throw Error(H2_STATUS_DEVICE_ERROR, "rank " + std::to_string(info_.rank) + ": Store::" + what +
                                              ": no answer from the rendezvous store at " + address_ + " within " +
                                              ms_text(wait));
    }
    auto [ok, text] = std::move(found->second);
    replies_.erase(found);
    if (!ok)
      throw Error(H2_STATUS_DEVICE_ERROR, "rank " + std::to_string(info_.rank) + ": Store::" + what + ": " + text);
    return text;
  }

  // Called with mutex_ held. A rank that had failed before says why the store went.
  Error lost_error(const std::string& what) const {
    std::string why = lost_reason_.empty() ? "closed" : lost_reason_;
    if (failure_) why += "; rank " + std::to_string(failure_->rank) + " had failed (" + failure_->reason + ")";
    return Error(H2_STATUS_DEVICE_ERROR, "rank " + std::to_string(info_.rank) + ": Store::" + what +
                                             ": the connection to the rendezvous store at " + address_ + " is gone (" +
                                             why + ")");
  }

  void connection_lost_locked(const std::string& reason) {
    if (!lost_) lost_reason_ = reason;
    lost_ = true;
    cv_.notify_all();
  }

  // Records the first failure of another rank and runs the handler for it, outside the lock.
  void report(const RankFailure& failure) {
    bool call_now = false;
    {
      std::lock_guard lock(mutex_);
      if (failure_) return;
      failure_ = failure;
      if (handler_) {
        handler_called_ = true;
        call_now = true;
      }
    }
    if (call_now) invoke(failure);
  }

  void invoke(const RankFailure& failure) {
    std::function<void(const RankFailure&)> handler;
    {
      std::lock_guard lock(mutex_);
      handler = handler_;
      if (!handler) return;  // cleared: the owner is going away
      ++handlers_running_;
    }
    try {
      handler(failure);
    } catch (const std::exception& e) {
      log(LogLevel::error, kLogSource, std::string("the failure handler threw: ") + e.what());
    }
    {
      std::lock_guard lock(mutex_);
      --handlers_running_;
    }
    cv_.notify_all();
  }

  void read_loop() {
    std::string why = "the rendezvous store closed the connection";
    while (true) {
      std::optional<std::string> frame = read_frame(socket_.get());
      if (!frame) break;
      heard();
      try {
        FrameReader in(*frame);
        MessageType type = in.type();
        if (type == MessageType::pong) {
          // Only that the store answered.
        } else if (type == MessageType::reply) {
          uint64_t id = in.u64();
          bool ok = in.u8() != 0;
          std::string text = in.str();
          {
            std::lock_guard lock(mutex_);
            replies_[id] = {ok, std::move(text)};
          }
          cv_.notify_all();
        } else if (type == MessageType::failure) {
          int rank = in.i32();
          std::string reason = in.str();
          report(RankFailure{rank, std::move(reason)});
        } else if (type == MessageType::shutdown) {
          why = in.str();
          std::lock_guard lock(mutex_);
          // After our goodbye the store may stop at any time; that is no failure.
          if (!closing_) failure_reason_for_shutdown_ = why;
        } else {
          why = "unexpected message from the rendezvous store";
          break;
        }
      } catch (const detail::ProtocolError& e) {
        why = std::string("malformed message from the rendezvous store: ") + e.what();
        break;
      }
    }
    bool report_rank0 = false;
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      connection_lost_locked(why);
      // Closing on our side, or after our goodbye or abort, is expected; anything else means rank 0
      // (which runs the store) is gone.
      if (!closing_ && !aborted_ && info_.rank != 0) {
        report_rank0 = true;
        reason = failure_reason_for_shutdown_.empty()
                     ? "the process running the rendezvous store exited without closing DiComm (its connection to " +
                           address_ + " closed)"
                     : failure_reason_for_shutdown_;
      }
    }
    if (report_rank0) report(RankFailure{0, reason});
  }

  void heard() { last_heard_ns_ = Clock::now().time_since_epoch().count(); }

  // Pings the store every heartbeat interval, so that it knows this rank is alive; a rank other than
  // 0 that has heard nothing from the store (no pong, no reply) for the stall limit reports rank 0,
  // whose process runs the store and has stopped or hangs.
  void heartbeat_loop() {
    std::chrono::milliseconds interval;
    {
      std::lock_guard lock(mutex_);
      interval = ping_interval_;
    }
    while (true) {
      {
        std::unique_lock lock(mutex_);
        if (cv_.wait_for(lock, interval, [&] { return closed_ || lost_ || aborted_; })) return;
      }
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(
          Clock::now() - Clock::time_point(Clock::duration(last_heard_ns_.load())));
      if (info_.rank != 0 && silent >= stall_limit_) {
        const std::string reason = "stopped responding: this rank has heard nothing from the rendezvous store at " +
                                   address_ + ", which rank 0 runs, for " + ms_text(silent) +
                                   " (a stopped process, e.g. SIGSTOP, or one that hangs; H2_DICOMM_TIMEOUT sets "
                                   "the limit)";
        bool closing = false;
        {
          // Requests from here on fail at once instead of waiting for answers that will not come.
          std::lock_guard lock(mutex_);
          connection_lost_locked(reason);
          closing = closing_;
        }
        cv_.notify_all();
        if (!closing) report(RankFailure{0, reason});  // after our goodbye, rank 0's silence is no failure
        return;
      }
      // Skipped while another thread is sending (a large set, say): that frame tells the store as much,
      // and a ping must not wait behind a blocked send.
      std::unique_lock send_lock(send_mutex_, std::try_to_lock);
      if (send_lock.owns_lock() && socket_.valid()) {
        const std::string ping = ping_frame();
        const ssize_t sent = ::send(socket_.get(), ping.data(), ping.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        // Never half a frame on the wire: the rest follows, as any frame's would.
        if (sent > 0 && static_cast<size_t>(sent) < ping.size())
          detail::send_all(socket_.get(), ping.data() + sent, ping.size() - static_cast<size_t>(sent));
      }
    }
  }

  // A ping: this rank's wait state, as its source says (2: unknown, without one).
  std::string ping_frame() {
    std::lock_guard lock(wait_state_mutex_);
    if (!wait_state_) return FrameWriter(MessageType::ping).u8(2).u64(0).finish();
    const WaitState state = wait_state_();
    const auto in_state = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - state.since).count();
    return FrameWriter(MessageType::ping)
        .u8(state.waiting ? 1 : 0)
        .u64(static_cast<uint64_t>(std::max<int64_t>(0, in_state)))
        .finish();
  }

  RankInfo info_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds stall_limit_;
  std::chrono::milliseconds ping_interval_;  // the store's, from its welcome (guarded by mutex_)
  std::atomic<Clock::duration::rep> last_heard_ns_{0};
  std::thread heartbeat_;
  std::string address_;
  std::string local_address_;
  std::unique_ptr<detail::StoreServer> server_;
  detail::Fd socket_;
  std::thread reader_;

  std::mutex send_mutex_;  // one frame at a time on the socket
  std::mutex mutex_;       // everything below
  std::condition_variable cv_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::pair<bool, std::string>> replies_;
  bool lost_ = false;
  std::string lost_reason_;
  bool closing_ = false;  // close() began: the goodbye is on its way
  bool closed_ = false;   // close() said goodbye (or gave up): no more requests
  bool aborted_ = false;
  std::string failure_reason_for_shutdown_;
  std::function<void(const RankFailure&)> handler_;
  std::mutex wait_state_mutex_;  // held while wait_state_ runs, so that clearing it waits for the call
  std::function<WaitState()> wait_state_;
  int handlers_running_ = 0;  // calls of handler_ in progress
  std::optional<RankFailure> failure_;
  bool handler_called_ = false;
};

// Every process of a PMIx job calls connect the same number of times, so a per-process count keeps
// the keys of successive stores apart.
std::atomic<int> pmix_store_count{0};

}  // namespace

std::unique_ptr<Store> Store::connect(const RankInfo& info, std::chrono::milliseconds timeout) {
  if (info.world_size < 1)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "Store::connect: world size " + std::to_string(info.world_size) + " < 1");
  RankInfo resolved = info;
  std::unique_ptr<detail::StoreServer> server;
  if (info.source == LaunchSource::pmix) {
    std::string suffix = std::to_string(pmix_store_count++);
    std::string address_key = "h2.dicomm.store.address." + suffix;
    std::string token_key = "h2.dicomm.store.token." + suffix;
    if (info.rank == 0) {
      // Without H2_JOB_TOKEN, a token only the job's processes learn (through PMIx) guards the store.
      if (resolved.token.empty()) resolved.token = random_token();
      server = std::make_unique<detail::StoreServer>(resolved.master_addr, resolved.master_port, resolved.world_size,
                                                     resolved.token, stall_limit_of(timeout));
      resolved.master_port = server->port();
      detail::pmix_publish(address_key, detail::join_host_port(resolved.master_addr, resolved.master_port));
      detail::pmix_publish(token_key, resolved.token);
    }
    detail::pmix_fence(timeout);
    if (info.rank != 0) {
      std::string address = detail::pmix_lookup(0, address_key);
      size_t colon = address.rfind(':');
      if (colon == std::string::npos)
        throw Error(H2_STATUS_INTERNAL, "rank 0 published the store address '" + address + "' through PMIx");
      std::string host = address.substr(0, colon);
      if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      resolved.master_addr = host;
      resolved.master_port = std::stoi(address.substr(colon + 1));
      resolved.token = detail::pmix_lookup(0, token_key);
    }
  } else if (info.rank == 0) {
    server = std::make_unique<detail::StoreServer>(info.master_addr, info.master_port, info.world_size, info.token,
                                                   stall_limit_of(timeout));
    resolved.master_port = server->port();
  }
  auto store = std::make_unique<TcpStore>(resolved, timeout);
  store->start(std::move(server));
  return store;
}

}  // namespace h2::dicomm
