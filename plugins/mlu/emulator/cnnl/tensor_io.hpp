// How the emulated CNNL kernels read and write device tensors: all of a tensor's elements, in row-major
// order of its dims (or of a shape it broadcasts to), as doubles, which hold every emulated dtype
// exactly; and back, rounded to the tensor's dtype (to nearest even; integers truncated toward zero
// and saturated). Kernels compute elementwise math in FP32, as the MLU's vector units do for FLOAT,
// HALF and BFLOAT16 data, and accumulate sums in at least FP32. Written for this emulator alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cnnl_objects.hpp"

namespace mlu_emulator {

size_t dtype_bytes(cnnlDataType_t dtype);  // 0 for a dtype the emulator does not know
bool is_floating(cnnlDataType_t dtype);
std::string dtype_text(cnnlDataType_t dtype);
std::string shape_text(const std::vector<int64_t>& dims);

// The value `x` becomes when stored as `dtype`.
double rounded_to(cnnlDataType_t dtype, double x);
// FP32 arithmetic: what a vector unit computes for f(x) of FP32 inputs.
inline float fp32(double x) {
  return static_cast<float>(x);
}

// Whether `from` broadcasts to `to` (align right; equal sizes or 1).
bool broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to);

std::vector<double> read(const Operand& t);
std::vector<double> read_broadcast(const Operand& t, const std::vector<int64_t>& shape);
void write(const Operand& t, const std::vector<double>& values);

}  // namespace mlu_emulator
