// fp16 and bf16 on the host, as raw bits: conversions from and to fp32, rounding to nearest even and
// keeping NaN (quiet), infinities and subnormals. For framework code that prepares or reads data.
#pragma once

#include <cstdint>

namespace h2 {

uint16_t f32_to_f16(float value);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

}  // namespace h2
