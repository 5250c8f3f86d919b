// Tensors as the reference's kernels see them: a descriptor whose device pointer has been checked
// against the device's allocations and translated to the plugin's own view of the memory, plus the
// conversions every kernel uses: gather a tensor into a row-major fp64 array, and scatter an fp64
// array back with one rounding to the tensor's dtype. Kernels compute on those arrays, so each stays
// a few lines of plain arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"
#include "values.hpp"

namespace h2::cpu_reference {

class Runtime;

struct TensorRef {
  char* base = nullptr;  // the plugin's view of element (0, ..., 0); nullptr when absent or empty
  H2_DType dtype = H2_DTYPE_INVALID;
  int rank = 0;
  int64_t shape[H2_MAX_RANK] = {};
  int64_t strides[H2_MAX_RANK] = {};

  bool present = false;  // false for an optional tensor passed with data == NULL
  int64_t numel() const;
  int64_t size(int dim) const { return shape[dim < 0 ? dim + rank : dim]; }
  // Element offset of the row-major logical index `linear`.
  int64_t offset_of(int64_t linear) const;
  // Forgets the view's strides, as a plugin that reads every tensor as contiguous would (the test
  // plugin's planted defects only).
  void assume_contiguous() {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= shape[d];
    }
  }
};

// Checks that the tensor lies in a live allocation of `device` and resolves it. `role` names it in
// errors ("a").
TensorRef resolve_tensor(const Runtime& runtime, int device, const H2_Tensor& tensor, const char* role);

size_t dtype_bytes(H2_DType dtype);

// All elements in row-major logical order, as fp64.
Values load(const TensorRef& t);
// Writes `values` (row-major, numel entries) into t, rounding once to t's dtype.
void store(const TensorRef& t, const Values& values);
// Integer tensors (I32, I64, U8, BOOL) in row-major order.
std::vector<int64_t> load_indices(const TensorRef& t);

// One element, by element offset (not logical index).
double load_element(const TensorRef& t, int64_t offset);
void store_element(const TensorRef& t, int64_t offset, double value);

// Rounds an fp64 value the way storing it into `dtype` would (for kernels that must match a
// same-dtype computation, such as uniform fill).
double round_to(H2_DType dtype, double value);

}  // namespace h2::cpu_reference
