// Philox-4x32-10 against the published known-answer vectors (Random123's kat_vectors), and the
// random operators against the stream the ABI defines, bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "../../../core/tests/test_support.hpp"
#include "common.hpp"
#include "h2/h2.hpp"

namespace h2::cpu_reference {
namespace {

TEST(Philox, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, SeedAndCounterMapOntoKeyAndCounterWords) {
  EXPECT_EQ(philox_block(0xa4093822299f31d0ull >> 32 | (0x299f31d0ull << 32), 0),
            philox4x32_10({0, 0, 0, 0}, {0xa4093822, 0x299f31d0}));
  EXPECT_EQ(philox_block(5, 0x0000000700000003ull), philox4x32_10({3, 7, 0, 0}, {5, 0}));
}

class RandomOperators : public testing::Test {
 protected:
  RandomOperators()
      : runtime_(test::cpu_reference_only()),
        device_(runtime_.device("cpu-reference", 0)),
        stream_(device_.create_stream()) {}
  Runtime runtime_;
  Device device_;
  Stream stream_;
};

TEST_F(RandomOperators, DropoutMaskIsThePhiloxStreamBitForBit) {
  const uint64_t seed = 0x123456789abcdefull, offset = 77;
  const double p = 0.37;
  Tensor x = Tensor::empty(device_, {1001}, DType::bf16), y = Tensor::empty(device_, {1001}, DType::bf16);
  Tensor mask = Tensor::empty(device_, {1001}, DType::u8);
  ops::fill(stream_, x, 1.0);
  ops::dropout(stream_, x, y, p, {.seed = seed, .offset = offset}, mask);
  const std::vector<double> m = mask.to_host(stream_);
  const auto threshold = static_cast<uint32_t>(std::floor(p * 16777216.0));
  for (size_t e = 0; e < m.size(); ++e) {
    const uint32_t word = philox_block(seed, offset + e / 4)[e % 4];
    ASSERT_EQ(m[e], (word >> 8) >= threshold ? 1.0 : 0.0) << "element " << e;
  }
}

TEST_F(RandomOperators, UniformIsTheDefinedFmaOfThePhiloxStream) {
  const uint64_t seed = 42, offset = 3;
  Tensor y = Tensor::empty(device_, {257}, DType::f32);
  ops::uniform(stream_, y, -0.5, 1.5, {.seed = seed, .offset = offset});
  const std::vector<double> values = y.to_host(stream_);
  for (size_t e = 0; e < values.size(); ++e) {
    const uint32_t word = philox_block(seed, offset + e / 4)[e % 4];
    const float u = static_cast<float>(word >> 8) * 0x1p-24f;
    ASSERT_EQ(values[e], std::fma(u, 2.0f, -0.5f)) << "element " << e;
  }
}

TEST_F(RandomOperators, OffsetsContinueTheSameStream) {
  // Drawing 8 then 8 more at offset + 2 equals drawing 16 at once.
  Tensor all = Tensor::empty(device_, {16}, DType::f32), first = Tensor::empty(device_, {8}, DType::f32),
         second = Tensor::empty(device_, {8}, DType::f32);
  ops::normal(stream_, all, 0, 1, {.seed = 9, .offset = 100});
  ops::normal(stream_, first, 0, 1, {.seed = 9, .offset = 100});
  ops::normal(stream_, second, 0, 1, {.seed = 9, .offset = 100 + ops::philox_counters(8)});
  std::vector<double> joined = first.to_host(stream_), tail = second.to_host(stream_);
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, all.to_host(stream_));
}

TEST_F(RandomOperators, NormalFollowsBoxMullerOnWordPairs) {
  Tensor y = Tensor::empty(device_, {6}, DType::f64);
  ops::normal(stream_, y, 0, 1, {.seed = 1, .offset = 0});
  const std::vector<double> values = y.to_host(stream_);
  for (uint64_t block = 0; block < 2; ++block) {
    const PhiloxBlock w = philox_block(1, block);
    for (int pair = 0; pair < 2; ++pair) {
      const size_t e = block * 4 + static_cast<size_t>(2 * pair);
      if (e >= values.size()) break;
      const double u1 = (static_cast<double>(w[static_cast<size_t>(2 * pair)] >> 8) + 1) * 0x1p-24;
      const double u2 = static_cast<double>(w[static_cast<size_t>(2 * pair + 1)] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2 * std::log(u1));
      EXPECT_DOUBLE_EQ(values[e], r * std::cos(2 * M_PI * u2));
      EXPECT_DOUBLE_EQ(values[e + 1], r * std::sin(2 * M_PI * u2));
    }
  }
}

}  // namespace
}  // namespace h2::cpu_reference
