// Dense tensors, the common case the reference's elementwise kernels, copies and fills handle
// without fp64 temporaries: the same fp64 arithmetic and one rounding per output as the general
// path (load, compute, store), element by element. That matters beyond speed: large temporaries are
// fresh pages every call, and page faults dominate in a VM (DiComm reduces, widens and casts every
// piece it moves with these operators).
#pragma once

#include <cstdint>

#include "parallel.hpp"
#include "tensor_ref.hpp"

namespace h2::cpu_reference {

// True when the tensor's elements lie densely in row-major order from base (no broadcast, no gaps).
inline bool dense(const TensorRef& t) {
  int64_t expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// y[i] = fn(i) for every element of dense `y`, rounded once to y's dtype, in parallel chunks.
template <typename Fn>
void dense_elementwise(ThreadPool& pool, const TensorRef& y, Fn&& fn) {
  pool.parallel_for(y.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) store_element(y, i, fn(i));
  });
}

}  // namespace h2::cpu_reference
