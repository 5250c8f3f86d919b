// Bit-level conversions (the classic integer formulation); the cpu-reference plugin has its own,
// arithmetic one, and the tests check the two against each other on every bit pattern.
#include "h2/half.hpp"

#include <bit>

namespace h2 {

uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the right result,
  // up to infinity.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {  // normal in fp16: drop 13 mantissa bits with round to nearest even
    const uint32_t rebased = magnitude - (112u << 23);  // exponent bias 127 -> 15
    const uint32_t rounding = 0x0fffu + ((rebased >> 13) & 1u);
    return sign | static_cast<uint16_t>((rebased + rounding) >> 13);
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal: the significand with its implicit one, shifted to units of 2^-24, rounded to even.
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 14 + 13;  // 14..24
  const uint32_t half_unit = 1u << (shift - 1);
  const uint32_t remainder = significand & ((1u << shift) - 1);
  uint32_t result = significand >> shift;
  if (remainder > half_unit || (remainder == half_unit && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: normalise.
  int e = -1;
  do {
    ++e;
    mantissa <<= 1;
  } while ((mantissa & 0x400u) == 0);
  return std::bit_cast<float>(sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace h2
