#include "view.cuh"

#include "dtype_size.hpp"

namespace h2::cuda {

int element_size(uint32_t dtype) {
  return static_cast<int>(h2::plugin::dtype_size(dtype));
}

int64_t numel(const H2_Tensor& t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

View make_view(const H2_Tensor& t) {
  View v{};
  v.data = static_cast<char*>(t.data);
  v.dtype = t.dtype;
  v.rank = static_cast<int32_t>(t.rank);
  v.element_size = element_size(t.dtype);
  int64_t expected = 1;
  bool contiguous = true;
  for (int d = static_cast<int>(t.rank) - 1; d >= 0; --d) {
    v.shape[d] = t.shape[d];
    v.strides[d] = t.strides[d];
    if (t.shape[d] != 1 && t.strides[d] != expected) contiguous = false;
    expected *= t.shape[d];
  }
  v.contiguous = contiguous ? 1 : 0;
  return v;
}

}  // namespace h2::cuda
