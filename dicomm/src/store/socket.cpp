#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/errno_text.hpp"

namespace h2::dicomm::detail {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool SocketAddress::is_loopback() const {
  if (family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string SocketAddress::ip() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof(text));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text, sizeof(text));
  }
  return text;
}

int SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

std::vector<SocketAddress> resolve(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // No AI_ADDRCONFIG: it hides loopback names on hosts whose only interface is loopback, and every
  // address returned is tried in turn anyway.
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  std::vector<SocketAddress> result;
  if (rc != 0) {
    error = std::string("cannot resolve '") + host + "': " + gai_strerror(rc);
    return result;
  }
  for (addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress address;
    std::memcpy(&address.storage, entry->ai_addr, entry->ai_addrlen);
    address.length = entry->ai_addrlen;
    result.push_back(address);
  }
  freeaddrinfo(list);
  if (result.empty()) error = "'" + host + "' has no TCP address";
  return result;
}

SocketAddress wildcard_address(int family, int port) {
  SocketAddress address;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    address.length = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&address.storage);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(static_cast<uint16_t>(port));
    address.length = sizeof(sockaddr_in);
  }
  return address;
}

Fd connect_before(const SocketAddress& address, Clock::time_point deadline, std::string& error) {
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    error = "socket: " + errno_text(errno);
    return Fd();
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    if (errno != EINPROGRESS) {
      error = errno_text(errno);
      return Fd();
    }
    // A SYN to an unreachable host can hang for minutes; wait no longer than the caller allows.
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        error = kConnectTimedOut;
        return Fd();
      }
      pollfd pfd{fd.get(), POLLOUT, 0};
      int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc > 0) break;
    }
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &length);
    if (so_error != 0) {
      error = errno_text(so_error);
      return Fd();
    }
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Fd listen_on(const SocketAddress& address, int backlog, std::string& error) {
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    error = "socket: " + errno_text(errno);
    return Fd();
  }
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (address.family() == AF_INET6) {
    // Dual stack, so IPv4 clients reach a store listening on the IPv6 wildcard.
    int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    error = "bind: " + errno_text(errno);
    return Fd();
  }
  if (::listen(fd.get(), backlog) != 0) {
    error = "listen: " + errno_text(errno);
    return Fd();
  }
  return fd;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

SocketAddress local_address_of(int fd) {
  SocketAddress address;
  address.length = sizeof(address.storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address.storage), &address.length) != 0) address.length = 0;
  return address;
}

bool send_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void set_io_timeouts(int fd, std::chrono::milliseconds receive, std::chrono::milliseconds send) {
  auto to_timeval = [](std::chrono::milliseconds ms) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
  };
  timeval rcv = to_timeval(receive);
  timeval snd = to_timeval(send);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
}

std::string join_host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace h2::dicomm::detail
