// The rendezvous store's server, run by rank 0 on a thread of its own. Internal to DiComm.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "socket.hpp"

namespace h2::dicomm::detail {

class StoreServer {
 public:
  // Listens on `host`:`port` (0: a port the kernel picks), on the addresses `host` resolves to (its
  // loopback ones only when it has no others: a local job stays off the network), not on every
  // interface; H2_STORE_LISTEN_ANY=1 listens on every interface, for clusters whose nodes reach this
  // one by an address its own name does not resolve to. A rank the server has heard nothing from (not
  // even a ping) for `stall_limit` is failed, and the others are told. Connections that have not been
  // welcomed are bounded in number, time and bytes (store_protocol.hpp). Throws h2::Error when it
  // cannot listen.
  StoreServer(const std::string& host, int port, int world_size, std::string token,
              std::chrono::milliseconds stall_limit);
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
