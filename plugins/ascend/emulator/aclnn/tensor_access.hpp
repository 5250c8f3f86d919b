// How the emulated operators read and write device tensors: element by element through a
// descriptor's view (any strides, broadcast by stride 0), in the device's arithmetic: FP16 and BF16
// values widen exactly to FP32, results round to nearest even when stored. Written for the emulator
// alone (nothing shared with the plugins), so a plugin and its test double never share a mistake.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aclnn_internal.hpp"

namespace ascend_emulator {

float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
size_t element_size(aclDataType dtype);
bool is_float(aclDataType dtype);  // FLOAT, FLOAT16, BF16, DOUBLE
std::string dtype_name(aclDataType dtype);

// Throws Error(ACLNN_ERR_PARAM_INVALID) naming `role` when the descriptor's view reaches outside its
// storage, or its storage is not inside one live device allocation.
void check_tensor(const aclTensor* tensor, const char* role);
int64_t element_count(const std::vector<int64_t>& shape);

// A tensor's elements in row-major order of `shape` (its own view, or a shape it broadcasts to).
class Elements {
 public:
  Elements(const aclTensor& tensor, const std::vector<int64_t>& shape);
  explicit Elements(const aclTensor& tensor) : Elements(tensor, tensor.view) {}

  int64_t count() const { return count_; }
  double load(int64_t index) const;               // exact for every emulated type
  void store(int64_t index, double value) const;  // rounds (and for integers truncates, saturating)
  // Logical elements [first, first + count) in order, as FP32 (what the kernels compute in): one
  // pass with a running multi-index instead of a division per element.
  void load_range(int64_t first, int64_t count, float* out) const;
  // The storage element offset of logical element `index`.
  int64_t offset_of(int64_t index) const;

 private:
  char* base_;
  aclDataType dtype_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t offset_;
  int64_t count_;
};

// Whether `from` broadcasts to `to` (NumPy rules: align right, sizes equal or 1).
bool broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to);
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace ascend_emulator
