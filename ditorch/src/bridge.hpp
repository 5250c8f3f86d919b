// What DiTorch's parts share: LibTorch tensors on PrivateUse1 seen as h2::Tensor views of the same
// memory, the dtype correspondence, and the allocator.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>

#include "h2/h2.hpp"

namespace h2torch {

c10::Allocator* torch_allocator();
// The H2 dtype of a LibTorch scalar type; an error naming both when H2 has none.
h2::DType h2_dtype(c10::ScalarType type);
// A PrivateUse1 tensor as an h2::Tensor view of its storage (same memory, offset, sizes, strides).
h2::Tensor as_h2(const at::Tensor& t);
// Counts `label` as run on the CPU (logging it the first time), or throws naming it under
// H2_TORCH_FALLBACK=error.
void note_fallback(const std::string& label);

}  // namespace h2torch
