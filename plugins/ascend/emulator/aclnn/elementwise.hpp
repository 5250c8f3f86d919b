// The pattern of the emulated elementwise operators: checked descriptors captured by value, and a
// kernel that maps every output element from its inputs (broadcast to the output's shape) in the
// device's arithmetic: FP32 for FLOAT, FLOAT16 and BFLOAT16 (rounded once when stored), FP64 only
// for DOUBLE.
#pragma once

#include <cmath>
#include <functional>
#include <type_traits>
#include <vector>

#include "tensor_access.hpp"

namespace ascend_emulator {

// Throws unless every tensor has `out`'s float type (FLOAT, FLOAT16, BFLOAT16 or DOUBLE) and every
// input broadcasts to `out`'s shape.
void check_float_map(const char* op, const aclTensor* out, const std::vector<const aclTensor*>& inputs);

template <typename Fn>
std::function<void(void*)> map_kernel(const aclTensor& out, std::vector<aclTensor> inputs, Fn fn) {
  return [out, inputs = std::move(inputs), fn](void*) {
    const Elements y(out);
    std::vector<Elements> xs;
    for (const aclTensor& input : inputs) xs.emplace_back(input, out.view);
    const bool wide = out.dtype == ACL_DOUBLE;
    for (int64_t i = 0; i < y.count(); ++i) {
      if constexpr (std::is_invocable_v<Fn, float>) {
        y.store(i, wide ? fn(xs[0].load(i)) : static_cast<double>(fn(static_cast<float>(xs[0].load(i)))));
      } else {
        y.store(i, wide
                       ? fn(xs[0].load(i), xs[1].load(i))
                       : static_cast<double>(fn(static_cast<float>(xs[0].load(i)), static_cast<float>(xs[1].load(i)))));
      }
    }
  };
}

}  // namespace ascend_emulator
