// Small POSIX TCP helpers for the rendezvous store: an owning file descriptor, name resolution,
// connect with a deadline, listen, and whole-buffer send/receive. Internal to DiComm.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace h2::dicomm::detail {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  bool is_loopback() const;
  // "127.0.0.1", "::1"
  std::string ip() const;
  int port() const;
};

// Resolves a host name or a numeric address; on failure returns nothing and sets `error`.
std::vector<SocketAddress> resolve(const std::string& host, int port, std::string& error);
// The wildcard address of a family, for listening on every interface.
SocketAddress wildcard_address(int family, int port);

inline constexpr const char* kConnectTimedOut = "connection attempt timed out";
// Connects within `deadline`; returns an invalid Fd and sets `error` when it cannot.
Fd connect_before(const SocketAddress& address, Clock::time_point deadline, std::string& error);
// A listening socket with SO_REUSEADDR; returns an invalid Fd and sets `error` when it cannot.
Fd listen_on(const SocketAddress& address, int backlog, std::string& error);

void set_nodelay(int fd);
void set_nonblocking(int fd);
// The address the socket is bound to locally (getsockname).
SocketAddress local_address_of(int fd);

// Sends all of `data` on a blocking socket (without SIGPIPE); false when the connection is gone.
bool send_all(int fd, const void* data, std::size_t size);
// Receives exactly `size` bytes on a blocking socket; false on EOF, error or SO_RCVTIMEO expiry.
bool recv_all(int fd, void* data, std::size_t size);
// Sets SO_RCVTIMEO / SO_SNDTIMEO; zero means no limit.
void set_io_timeouts(int fd, std::chrono::milliseconds receive, std::chrono::milliseconds send);

// "host:port", with brackets around an IPv6 literal.
std::string join_host_port(const std::string& host, int port);

}  // namespace h2::dicomm::detail
