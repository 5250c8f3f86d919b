// Tensors laid one after another in one 1-D buffer and back: how views of several parameters (some
// strided: a tensor-parallel piece of w_qkv) travel in one message.
#pragma once

#include <cstdint>
#include <vector>

#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::heteropp {

struct WeightedView {
  Tensor view;
  double weight = 1;  // the view's elements are multiplied by it on the way in
};

// A 1-D `dtype` tensor of `length` elements (at least the views' total; the rest are zeros) holding
// each view's elements, weighted, in order. Enqueued on `stream`.
Tensor pack(Stream& stream, const std::vector<WeightedView>& views, int64_t length, DType dtype);
// Copies consecutive elements of `packed` back into `views`, in order (converting to their dtype).
void unpack(Stream& stream, const Tensor& packed, const std::vector<Tensor>& views);

// The views alone (for unpack), and how many elements they hold together.
std::vector<Tensor> tensors_of(const std::vector<WeightedView>& views);
int64_t elements_of(const std::vector<WeightedView>& views);

}  // namespace h2::heteropp
