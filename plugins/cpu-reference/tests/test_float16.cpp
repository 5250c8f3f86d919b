// The reference's fp16/bf16 conversions (from fp64, arithmetic) against the core's (from fp32, bit
// manipulation): two independent implementations that must agree on every value they share.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "common.hpp"
#include "h2/half.hpp"

namespace h2::cpu_reference {
namespace {

TEST(Float16, EveryBitPatternDecodesTheSame) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const double f16 = f16_to_f64(b), bf16 = bf16_to_f64(b);
    const float core_f16 = h2::f16_to_f32(b), core_bf16 = h2::bf16_to_f32(b);
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(core_f16)) << bits;
    } else {
      EXPECT_EQ(f16, static_cast<double>(core_f16)) << bits;
    }
    if (std::isnan(bf16)) {
      EXPECT_TRUE(std::isnan(core_bf16)) << bits;
    } else {
      EXPECT_EQ(bf16, static_cast<double>(core_bf16)) << bits;
    }
  }
}

TEST(Float16, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    if (std::isnan(f16_to_f64(b))) continue;
    EXPECT_EQ(f64_to_f16(f16_to_f64(b)), b) << bits;
    EXPECT_EQ(f64_to_bf16(bf16_to_f64(b)), b) << bits;
  }
}

TEST(Float16, EncodingFloatsAgreesWithTheCore) {
  // Random bit patterns cover every exponent, ties included (many low bits are zero).
  std::mt19937 gen(5);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = gen();
    if (i % 4 == 0) bits &= 0xffffe000u;  // ties and exact values for f16
    if (i % 4 == 1) bits &= 0xffff8000u;  // ties for bf16
    const float value = std::bit_cast<float>(bits);
    if (std::isnan(value)) continue;
    ASSERT_EQ(f64_to_f16(value), h2::f32_to_f16(value)) << std::hexfloat << value;
    ASSERT_EQ(f64_to_bf16(value), h2::f32_to_bf16(value)) << std::hexfloat << value;
  }
}

TEST(Float16, NaNStaysNaNWithItsSign) {
  EXPECT_EQ(f64_to_f16(std::nan("")), 0x7e00);
  EXPECT_EQ(f64_to_bf16(-std::nan("")), 0xffc0);
  EXPECT_EQ(h2::f32_to_f16(std::nanf("")), 0x7e00);
  EXPECT_TRUE(std::isnan(h2::bf16_to_f32(h2::f32_to_bf16(-std::nanf("")))));
}

}  // namespace
}  // namespace h2::cpu_reference
