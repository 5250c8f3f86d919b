#include "pipeline_messages.hpp"

namespace h2::heteropp {

PipelineMessages::PipelineMessages(const dicomm::Communicator& world, Stream& stream, Timeline& timeline, Shape shape,
                                   DType dtype, int micro_batches)
    : world_(world),
      stream_(stream),
      timeline_(timeline),
      shape_(std::move(shape)),
      dtype_(dtype),
      micro_batches_(micro_batches) {}

void PipelineMessages::post(int j, int peer, uint32_t tag) {
  if (inbox_.count(tag) || j >= micro_batches_) return;
  Tensor tensor = Tensor::empty(stream_, shape_, dtype_);
  dicomm::Request request = world_.irecv(stream_, tensor, peer, tag);
  inbox_.emplace(tag, std::make_pair(tensor, request));
}

Tensor PipelineMessages::receive(int j, int peer, uint32_t tag, const char* what) {
  post(j, peer, tag);
  auto [tensor, request] = inbox_.at(tag);
  inbox_.erase(tag);
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  request.wait();
  timeline_.add(what, "comm", start, Timeline::Clock::now(), {{"micro_batch", j}, {"peer", peer}});
  post(j + 1, peer, tag + 2);  // the same direction's next micro-batch
  return tensor;
}

void PipelineMessages::send(const Tensor& tensor, int peer, uint32_t tag, const char* what, int j) {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  sends_.push_back(world_.isend(stream_, tensor, peer, tag));
  timeline_.add(what, "comm", start, Timeline::Clock::now(), {{"micro_batch", j}, {"peer", peer}});
}

void PipelineMessages::finish_step() {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  for (dicomm::Request& request : sends_) request.wait();
  if (!sends_.empty()) timeline_.add("wait sends", "comm", start, Timeline::Clock::now());
  sends_.clear();
  inbox_.clear();  // none is left: every posted receive was for a micro-batch of this step
}

}  // namespace h2::heteropp
