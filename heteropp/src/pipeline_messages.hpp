// The activations and gradients a pipeline stage exchanges with its neighbours, over DiComm
// point-to-point: micro-batch j's activations travel forward with tag 2j, its gradients backward
// with tag 2j + 1. The receive of a peer's next micro-batch is posted as soon as the current one has
// arrived, so that the transfer overlaps this stage's compute; sends complete in the background
// until the end of the step's pipeline.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::heteropp {

class PipelineMessages {
 public:
  // Every message is a tensor of `shape` and `dtype` (a micro-batch's activations); the stage runs
  // `micro_batches` of them per step. References must outlive this.
  PipelineMessages(const dicomm::Communicator& world, Stream& stream, Timeline& timeline, Shape shape, DType dtype,
                   int micro_batches);

  // Micro-batch j's activations from the previous stage's `peer` (blocks until they are here).
  Tensor receive_activations(int j, int peer) { return receive(j, peer, activation_tag(j), "recv activations"); }
  // Micro-batch j's gradients from the next stage's `peer`.
  Tensor receive_gradients(int j, int peer) { return receive(j, peer, gradient_tag(j), "recv gradients"); }
  void send_activations(const Tensor& tensor, int peer, int j) {
    send(tensor, peer, activation_tag(j), "send activations", j);
  }
  void send_gradients(const Tensor& tensor, int peer, int j) {
    send(tensor, peer, gradient_tag(j), "send gradients", j);
  }
  // At the end of the step's pipeline: waits for every send (their tensors may then be reused).
  void finish_step();

 private:
  static uint32_t activation_tag(int j) { return 2u * static_cast<uint32_t>(j); }
  static uint32_t gradient_tag(int j) { return 2u * static_cast<uint32_t>(j) + 1; }
  void post(int j, int peer, uint32_t tag);
  Tensor receive(int j, int peer, uint32_t tag, const char* what);
  void send(const Tensor& tensor, int peer, uint32_t tag, const char* what, int j);

  const dicomm::Communicator& world_;
  Stream& stream_;
  Timeline& timeline_;
  Shape shape_;
  DType dtype_;
  int micro_batches_;
  std::map<uint32_t, std::pair<Tensor, dicomm::Request>> inbox_;  // posted receives by tag
  std::vector<dicomm::Request> sends_;
};

}  // namespace h2::heteropp
