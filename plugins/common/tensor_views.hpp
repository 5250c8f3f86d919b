// Views of the ABI's tensor descriptors that the accelerator plugins compose their operators with:
// the shape as a vector, a contiguous reshape of scratch memory, a statistic widened by a dimension.
// They change descriptors only, never memory.
#pragma once

#include <cstdint>
#include <vector>

#include "h2/plugin_abi.h"

namespace h2::plugin {

inline std::vector<int64_t> shape_of(const H2_Tensor& t) {
  return std::vector<int64_t>(t.shape, t.shape + t.rank);
}

inline std::vector<int64_t> all_dims(const H2_Tensor& t) {  // 0, 1, ..., rank - 1
  std::vector<int64_t> dims;
  for (uint32_t d = 0; d < t.rank; ++d) dims.push_back(d);
  return dims;
}

inline int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

inline int64_t element_count(const H2_Tensor& t) {
  int64_t count = 1;
  for (uint32_t d = 0; d < t.rank; ++d) count *= t.shape[d];
  return count;
}

// `t`'s memory seen with `shape` and row-major contiguous strides (for contiguous scratch tensors).
inline H2_Tensor reshaped(const H2_Tensor& t, const std::vector<int64_t>& shape) {
  H2_Tensor view = t;
  view.rank = static_cast<uint32_t>(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    view.shape[d] = shape[d];
    view.strides[d] = stride;
    stride *= shape[d];
  }
  for (size_t d = shape.size(); d < H2_MAX_RANK; ++d) view.shape[d] = view.strides[d] = 0;
  return view;
}

// `t` with one more, last dimension of `size` elements `stride` apart: a per-row statistic [n] as the
// column [n, 1] (stride 1) that broadcasts over a row, or repeated (stride 0).
inline H2_Tensor appended_dimension(H2_Tensor t, int64_t size, int64_t stride) {
  t.shape[t.rank] = size;
  t.strides[t.rank] = stride;
  ++t.rank;
  return t;
}

// The last two dimensions of `t` swapped (a transpose as a view).
inline H2_Tensor transposed(H2_Tensor t) {
  const uint32_t last = t.rank - 1;
  std::swap(t.shape[last], t.shape[last - 1]);
  std::swap(t.strides[last], t.strides[last - 1]);
  return t;
}

// `count` contiguous elements of `dtype` at `data`, as a one-dimensional tensor.
inline H2_Tensor flat_tensor(const void* data, uint32_t dtype, uint64_t count) {
  H2_Tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = 1;
  t.shape[0] = static_cast<int64_t>(count);
  t.strides[0] = 1;
  return t;
}

}  // namespace h2::plugin
