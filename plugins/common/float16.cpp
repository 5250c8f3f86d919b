#include "float16.hpp"

#include <cmath>

namespace h2::plugin {

namespace {

// A binary floating-point format with `precision` significand bits (the implicit one included).
struct Format {
  int precision;     // 11 for fp16, 8 for bf16
  int min_exponent;  // exponent of the smallest normal number: -14, -126
  int max_exponent;  // exponent of the largest finite number: 15, 127
  uint16_t quiet_nan;
};

constexpr Format kF16{11, -14, 15, 0x7e00};
constexpr Format kBF16{8, -126, 127, 0x7fc0};

double decode(uint16_t bits, const Format& f) {
  const int mantissa_bits = f.precision - 1;
  const int exponent_bits = 15 - mantissa_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const bool negative = (bits & 0x8000) != 0;
  const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  double magnitude;
  if (exponent == (1 << exponent_bits) - 1) {
    magnitude = mantissa != 0 ? std::nan("") : INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), f.min_exponent - mantissa_bits);  // subnormal
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | (1 << mantissa_bits)), exponent - bias - mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

uint16_t encode(double value, const Format& f) {
  const int mantissa_bits = f.precision - 1;
  const int exponent_bits = 15 - mantissa_bits;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | f.quiet_nan;
  const uint16_t infinity = static_cast<uint16_t>(((1 << exponent_bits) - 1) << mantissa_bits);
  double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return sign | infinity;
  if (magnitude == 0) return sign;

  // Round to a multiple of the spacing of representable numbers near the value; below the normal
  // range the spacing stays that of the subnormals. Scaling by powers of two is exact, and nearbyint
  // rounds to nearest with ties to even in the default rounding mode.
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent with m in [0.5, 1)
  const int quantum_exponent = std::max(exponent - 1, f.min_exponent) - mantissa_bits;
  const double units = std::nearbyint(std::ldexp(magnitude, -quantum_exponent));  // significand, as an integer
  const double rounded = std::ldexp(units, quantum_exponent);
  const double max_finite = std::ldexp(static_cast<double>((1 << f.precision) - 1), f.max_exponent - mantissa_bits);
  if (rounded > max_finite) return sign | infinity;

  if (rounded < std::ldexp(1.0, f.min_exponent))  // subnormal (or rounded up to the smallest normal below)
    return sign | static_cast<uint16_t>(units);
  std::frexp(rounded, &exponent);
  const int biased = exponent - 1 + bias;
  const auto mantissa = static_cast<uint16_t>(
      static_cast<uint32_t>(std::ldexp(rounded, mantissa_bits - (exponent - 1))) & ((1u << mantissa_bits) - 1));
  return sign | static_cast<uint16_t>(biased << mantissa_bits) | mantissa;
}

}  // namespace

double f16_to_f64(uint16_t bits) {
  return decode(bits, kF16);
}
double bf16_to_f64(uint16_t bits) {
  return decode(bits, kBF16);
}
uint16_t f64_to_f16(double value) {
  return encode(value, kF16);
}
uint16_t f64_to_bf16(double value) {
  return encode(value, kBF16);
}

}  // namespace h2::plugin
