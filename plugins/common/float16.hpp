// fp16 and bf16 as raw bits, converted from fp64 with one rounding (to nearest, ties to even), so the
// reference never rounds twice. Handles NaN (kept as a quiet NaN with its sign), infinities,
// subnormals and overflow (to infinity).
#pragma once

#include <cstdint>

namespace h2::plugin {

double f16_to_f64(uint16_t bits);
double bf16_to_f64(uint16_t bits);
uint16_t f64_to_f16(double value);
uint16_t f64_to_bf16(double value);

}  // namespace h2::plugin
