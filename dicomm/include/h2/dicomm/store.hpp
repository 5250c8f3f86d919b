// The rendezvous store: a small key-value service that rank 0 runs over TCP for the job, and the
// job's failure detector.
//
// Every rank (rank 0 too) connects to it presenting the job's token; a connection with another token
// is refused with an error naming the token. Ranks use it to exchange fabric addresses and to agree
// on communicator ids. Each rank also holds a watch connection: when a rank's watch connection
// closes without a goodbye (the process died) or a rank calls abort(), the store tells every other
// rank, whose failure handler then fails all pending communication naming the rank. Every rank also
// pings the store (20 times per stall limit, 90% of the timeout given to connect): a rank the store
// has not heard from for the stall limit (a stopped process) is failed the same way, and a rank that
// has not heard from the store for as long reports rank 0, whose process runs it. A ping also says
// whether the rank is waiting for its peers (report_wait_state): a rank alive but hung outside
// DiComm keeps pinging, and activity() lets the ranks that time out waiting for it name it.
//
// Implementation notes (dicomm/src/store/store*.cpp, store_protocol.hpp for the wire format):
// - Each rank holds one TCP connection (TCP_NODELAY) to the store, used both for requests and as
//   the watch connection: a reader thread matches replies to requests by id (so several threads of
//   a rank may call concurrently) and receives failure notices pushed by the server.
// - A rank "died" when its connection closes without a goodbye: the process exited or crashed
//   without running destructors. Destroying a Store without close() is a clean exit (the destructor
//   calls close()), unless abort() was called, in which case it closes without a goodbye and the
//   others have already been told "aborted: <reason>".
// - When rank 0's process (and with it the server) dies, every other rank's reader sees the
//   connection close and reports rank 0. When rank 0 closes while others are still connected, it
//   waits for them up to the timeout, then tells the rest (their handler runs with rank 0 and
//   "rank 0 closed the rendezvous store after waiting ...").
// - A barrier fails at once, naming the rank, when a rank has failed or closed: it can never
//   complete. A get of a key nobody has set keeps waiting (another rank may still set it) until the
//   timeout, unless a rank has failed: a failure fails the job, so the get then fails at once, naming
//   the rank that failed first (so survivors cannot meet through new keys after a failure).
// - Errors are h2::Error: H2_STATUS_INVALID_ARGUMENT when the store refuses the rank or a call comes
//   after close(), H2_STATUS_DEVICE_ERROR for timeouts, an unreachable store and a lost connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "h2/dicomm/bootstrap.hpp"

namespace h2::dicomm {

struct RankFailure {
  int rank = -1;       // the rank that failed
  std::string reason;  // "the process exited without closing DiComm (connection closed)", "aborted: <reason>"
};

// Whether a rank is inside a wait for its peers (a DiComm operation), and since when: what its pings
// carry, so that a rank whose wait times out can name the rank that never came.
struct WaitState {
  bool waiting = false;
  std::chrono::steady_clock::time_point since{};  // when it began waiting, or stopped
};

// A rank as the store last heard of it (Store::activity).
struct RankActivity {
  int rank = -1;
  bool connected = false;                  // in the job now (not yet joined, closed or failed: false)
  bool reported = false;                   // its pings carry a WaitState (it has a DiComm world)
  bool waiting = false;                    // inside a wait for its peers
  std::chrono::milliseconds in_state{0};   // how long it had been waiting, or not, at its last ping
  std::chrono::milliseconds heard_ago{0};  // since that ping
};

class Store {
 public:
  virtual ~Store() = default;

  // Connects rank `info.rank` (rank 0 first starts the server on info.master_port, or on a port of
  // its choosing when it is 0). Retries the connection until `timeout`, then throws h2::Error naming
  // the address. Throws when the store refuses the rank (wrong token, rank already connected, world
  // size that differs from the server's).
  static std::unique_ptr<Store> connect(const RankInfo& info, std::chrono::milliseconds timeout);

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The address the store listens on, "host:port" (for publishing through PMIx).
  virtual std::string address() const = 0;
  // The local IP address this rank uses to reach the store (selects the NIC the fabric should use).
  virtual std::string local_address() const = 0;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` is set, up to the timeout given to connect(); throws h2::Error naming the key.
  virtual std::string get(const std::string& key) = 0;
  // Atomically adds `delta` to the integer stored at `key` (absent: 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Every rank of the world waits until all have called barrier with the same `name`.
  virtual void barrier(const std::string& name) = 0;
  // As barrier, but this rank waits at most `limit` (and never longer than the timeout); throws
  // h2::Error naming the ranks missing when they do not all come in that time.
  virtual void barrier_within(const std::string& name, std::chrono::milliseconds limit) = 0;

  // Called (from the store's own thread) once for the first failure of another rank. When that
  // failure happened before the handler was set, the handler runs at once, on the calling thread.
  // The handler must not call close() or destroy the Store (close() from it is ignored and logged);
  // abort() is fine. Exceptions it throws are logged. An empty handler clears it, and returns once no
  // call of the old one is running any more (so that what it points at may go); never clear it from
  // the handler itself.
  virtual void on_failure(std::function<void(const RankFailure&)> handler) = 0;
  // Sets what this rank's pings carry from now on (empty: nothing). Called on the store's heartbeat
  // thread, so it must be quick and never block. Clearing returns once no call is running.
  virtual void report_wait_state(std::function<WaitState()> source) = 0;
  // Every rank's latest ping, from the store (a round trip; waits up to the timeout given to connect).
  virtual std::vector<RankActivity> activity() = 0;
  // Tells every rank that this one aborted; their failure handlers run with "aborted: <reason>".
  // Returns once the store has acknowledged it (or the timeout passed), so the notice has left this
  // process even if it exits right after.
  virtual void abort(const std::string& reason) = 0;
  // Says goodbye: a later close of the connection is not a failure. Rank 0 keeps serving until every
  // rank has said goodbye or died, or the timeout has passed. Never throws; a second call does
  // nothing; later set/get/add/barrier calls throw.
  virtual void close() = 0;
};

}  // namespace h2::dicomm
