#include "packing.hpp"

#include "h2/ops.hpp"

namespace h2::heteropp {

Tensor pack(Stream& stream, const std::vector<WeightedView>& views, int64_t length, DType dtype) {
  const Tensor buffer = Tensor::empty(stream, {length}, dtype);
  int64_t offset = 0;
  for (const WeightedView& part : views) {
    const Tensor to = buffer.slice(0, offset, offset + part.view.numel()).view(part.view.shape());
    offset += part.view.numel();
    if (part.weight == 1) {
      ops::copy(stream, part.view, to);
    } else if (dtype == DType::f32) {
      ops::binary(stream, ops::BinaryOp::mul, part.view, part.weight, to);
    } else {  // weighted in f32, rounded once
      const Tensor weighted = Tensor::empty(stream, part.view.shape(), DType::f32);
      ops::binary(stream, ops::BinaryOp::mul, part.view, part.weight, weighted);
      ops::copy(stream, weighted, to);
    }
  }
  if (offset < length) ops::fill(stream, buffer.slice(0, offset, length), 0);
  return buffer;
}

void unpack(Stream& stream, const Tensor& packed, const std::vector<Tensor>& views) {
  int64_t offset = 0;
  for (const Tensor& view : views) {
    ops::copy(stream, packed.slice(0, offset, offset + view.numel()).view(view.shape()), view);
    offset += view.numel();
  }
}

std::vector<Tensor> tensors_of(const std::vector<WeightedView>& views) {
  std::vector<Tensor> tensors;
  for (const WeightedView& v : views) tensors.push_back(v.view);
  return tensors;
}

int64_t elements_of(const std::vector<WeightedView>& views) {
  int64_t n = 0;
  for (const WeightedView& v : views) n += v.view.numel();
  return n;
}

}  // namespace h2::heteropp
