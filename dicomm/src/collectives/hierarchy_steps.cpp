#include "hierarchy_steps.hpp"

#include <exception>

#include "collectives/vendor_path.hpp"
#include "h2/dicomm/error.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

Steps::Steps(CommState& s, Hierarchy& h, Stream& stream, std::string what, const std::string& kind)
    : s_(s), h_(h), stream_(stream), what_(std::move(what)) {
  if (h.announced.insert(kind).second)
    log(LogLevel::info, "dicomm", "communicator '" + s.name + "': first hierarchical " + kind);
}

void Steps::allreduce_inside(const Tensor& data, ReduceOp op, Accumulation accumulation) {
  if (h_.library)
    on_library("allreduce", [&] { h_.library->allreduce(stream_, data, data, library_op(op)); });
  else if (h_.inside)
    communicator_over(h_.inside).allreduce(stream_, data, op, accumulation);
}

void Steps::reduce_scatter_inside(const Tensor& input, const Tensor& output, ReduceOp op, Accumulation accumulation) {
  if (h_.library)
    on_library("reduce-scatter", [&] { h_.library->reduce_scatter(stream_, input, output, library_op(op)); });
  else if (h_.inside)
    communicator_over(h_.inside).reduce_scatter(stream_, input, output, op, accumulation);
}

void Steps::allgather_inside(const Tensor& input, const Tensor& output) {
  if (h_.library)
    on_library("allgather", [&] { h_.library->allgather(stream_, input, output); });
  else if (h_.inside)
    communicator_over(h_.inside).allgather(stream_, input, output);
}

void Steps::broadcast_inside(const Tensor& data, int root) {
  if (h_.library)
    on_library("broadcast", [&] { h_.library->broadcast(stream_, data, data, root); });
  else if (h_.inside)
    communicator_over(h_.inside).broadcast(stream_, data, root);
}

void Steps::on_library(const char* step, const std::function<void()>& call) {
  run_on_library(s_, *h_.library, stream_, what_ + ", " + step + " in the group", call);
}

Temporaries::Temporaries(CommState& s, Stream& stream, const Device& device)
    : s_(s), stream_(stream), exceptions_(std::uncaught_exceptions()) {
  if (!(stream.device() == device))
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: a collective on " + device.label() + " was given a stream of " + stream.device().label() +
                        " (communicator '" + s.name + "'): use a stream of the tensors' device");
}

Temporaries::~Temporaries() {
  if (std::uncaught_exceptions() > exceptions_)
    s_.kept_after_failure.insert(s_.kept_after_failure.end(), made_.begin(), made_.end());
}

Tensor Temporaries::make(int64_t numel, DType dtype) {
  made_.push_back(Tensor::empty(stream_, {numel}, dtype));
  return made_.back();
}

void copy_elements(Stream& stream, const Tensor& from, int64_t from_at, const Tensor& to, int64_t to_at,
                   int64_t count) {
  if (count <= 0) return;
  const size_t element = dtype_size(from.dtype());
  stream.copy(*to.buffer(), static_cast<size_t>(to.offset() + to_at) * element, *from.buffer(),
              static_cast<size_t>(from.offset() + from_at) * element, static_cast<size_t>(count) * element);
}

}  // namespace h2::dicomm::detail
