// The rendezvous store's server, run by rank 0 on a thread of its own. Internal to DiComm.
#pragma once

#include <memory>
#include <string>

#include "socket.hpp"

namespace h2::dicomm::detail {

class StoreServer {
 public:
  // Listens on `host`:`port` (0: a port the kernel picks). A host that resolves only to loopback
  // addresses is bound as such, which keeps a local job off the network; any other host is served on
  // every interface (dual-stack wildcard), because a node's own name often resolves differently on
  // the node (Debian maps it to 127.0.1.1) than on its peers. Throws h2::Error when it cannot listen.
  StoreServer(const std::string& host, int port, int world_size, std::string token);
  // Stops at once (after a short flush of what is queued for the clients).
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;
  // Keeps serving until every rank has said goodbye or failed, or until `deadline`; then tells the
  // ranks still connected that the store stopped, and returns when the server thread has ended.
  void stop(Clock::time_point deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h2::dicomm::detail
