// The collective library a plugin offers on its own devices (ABI 1.5, plugin_abi.h section 9):
// NCCL for CUDA, HCCL for Ascend, CNCL for Cambricon, shared memory between the processes of one node
// for cpu-reference. DiComm runs a communicator on it where every rank uses that plugin's devices;
// framework code uses DiComm, not this.
//
//   H2_CommUniqueId id = h2::PluginComm::unique_id(device);   // on one rank; carry it to the others
//   h2::PluginComm comm(device, id, ranks, rank, timeout);     // on every rank: blocks until all join
//   comm.allreduce(stream, grads, grads, H2_REDUCE_SUM);       // enqueued on the stream
//
// Every data call enqueues on `stream` (a stream of the communicator's device) and returns; what is
// enqueued on the stream after it sees the result. A failure while the work runs (a peer gone, an
// abort, the library's timeout) becomes the stream's error, reported by its next synchronize.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "h2/device.hpp"
#include "h2/plugin_abi.h"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2 {

enum class CommScope { node, network };

struct CollectiveLibrary {
  std::string name;  // "NCCL 2.21.5"
  CommScope scope;   // node: every rank on one node
  // How many leading bytes of an H2_CommUniqueId its ids use: all another rank needs to be sent.
  size_t unique_id_bytes = 0;
};

class PluginComm {
 public:
  // The library `device`'s plugin offers, or nullopt when it has none.
  static std::optional<CollectiveLibrary> library(const Device& device);
  // A new id for one communicator; throws h2::Error (H2_STATUS_UNSUPPORTED without a library).
  static H2_CommUniqueId unique_id(const Device& device);

  // Member `rank` of the `ranks`-rank communicator `id` names, on `device`. Blocks until every rank
  // has joined; throws h2::Error naming what failed once `timeout` has passed (0: the plugin's own).
  PluginComm(const Device& device, const H2_CommUniqueId& id, int ranks, int rank,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  ~PluginComm();  // destroys the communicator; the caller has synchronized its streams or aborted
  PluginComm(const PluginComm&) = delete;
  PluginComm& operator=(const PluginComm&) = delete;

  const Device& device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string library_name() const { return table().library_name; }

  // As plugin_abi.h section 9 says, on contiguous tensors of the communicator's device; `op` is
  // H2_REDUCE_SUM, H2_REDUCE_MEAN or H2_REDUCE_MAX. Throws h2::Error for tensors that do not fit
  // the call (naming them) and for what the plugin refuses.
  void allreduce(Stream& stream, const Tensor& send, const Tensor& recv, H2_ReduceOp op) const;
  // send: size() blocks of recv's numel.
  void reduce_scatter(Stream& stream, const Tensor& send, const Tensor& recv, H2_ReduceOp op) const;
  // recv: size() blocks of send's numel.
  void allgather(Stream& stream, const Tensor& send, const Tensor& recv) const;
  // `send` is read on `root` only (it may be undefined elsewhere).
  void broadcast(Stream& stream, const Tensor& send, const Tensor& recv, int root) const;
  void send(Stream& stream, const Tensor& tensor, int peer) const;
  void recv(Stream& stream, const Tensor& tensor, int peer) const;
  // The calls of this thread between the two are issued together (a send and a receive with one
  // peer do not wait for each other). Pairs nest.
  void group_start() const;
  void group_end() const;

  // Fails queued, running and later work of the communicator on every rank the library reaches.
  // Any thread, any time; never throws.
  void abort(const std::string& reason) const noexcept;

 private:
  const H2_CollectiveTable& table() const;
  void check_tensor(const Tensor& tensor, const char* call, const char* role) const;
  Device device_;
  H2_Comm* comm_ = nullptr;
  int size_ = 0, rank_ = 0;
};

}  // namespace h2
