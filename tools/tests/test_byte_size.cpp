// The one parser of byte-size values on the command line (tools/src/byte_size.hpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "byte_size.hpp"

namespace h2::tools {
namespace {

using testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "'" << text << "' was accepted";
  return "";
}

TEST(ByteSize, PlainNumbersAreBytes) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("18446744073709551615"), UINT64_MAX);
}

// As nccl-tests' -b/-e: K = KiB = 1024, and the unit's case does not matter.
TEST(ByteSize, UnitsArePowersOf1024InAnyCase) {
  EXPECT_EQ(parse_byte_size("16M"), 16u << 20);
  EXPECT_EQ(parse_byte_size("16MiB"), 16u << 20);
  EXPECT_EQ(parse_byte_size("16mib"), 16u << 20);
  EXPECT_EQ(parse_byte_size("16m"), 16u << 20);
  EXPECT_EQ(parse_byte_size("8K"), 8192u);
  EXPECT_EQ(parse_byte_size("8KiB"), 8192u);
  EXPECT_EQ(parse_byte_size("1G"), 1u << 30);
  EXPECT_EQ(parse_byte_size("1gib"), 1u << 30);
  EXPECT_EQ(parse_byte_size("2T"), 2ull << 40);
  EXPECT_EQ(parse_byte_size("2TiB"), 2ull << 40);
  EXPECT_EQ(parse_byte_size("512B"), 512u);
  EXPECT_EQ(parse_byte_size("16777215T"), 16777215ull << 40);
}

TEST(ByteSize, GarbageNegativeFractionsAndOverflowAreRefusedWithTheirReason) {
  EXPECT_THAT(error_of(""), HasSubstr("an empty value is not a byte size"));
  EXPECT_THAT(error_of("-5"), HasSubstr("'-5' is negative"));
  EXPECT_THAT(error_of("-5M"), HasSubstr("'-5M' is negative"));
  EXPECT_THAT(error_of("lots"), HasSubstr("'lots' is not a byte size"));
  EXPECT_THAT(error_of("M"), HasSubstr("'M' is not a byte size"));
  EXPECT_THAT(error_of(" 16M"), HasSubstr("is not a byte size"));
  EXPECT_THAT(error_of("16X"), HasSubstr("'16X' has an unknown unit 'X'"));
  EXPECT_THAT(error_of("0x10"), HasSubstr("unknown unit 'x10'"));
  EXPECT_THAT(error_of("16 M"), HasSubstr("unknown unit ' M'"));
  EXPECT_THAT(error_of("1.5M"), HasSubstr("'1.5M' is not a whole number of bytes"));
  EXPECT_THAT(error_of("1e6"), HasSubstr("'1e6' is not a whole number of bytes"));
  EXPECT_THAT(error_of("18446744073709551616"), HasSubstr("is too large"));
  EXPECT_THAT(error_of("99999999999999999999999"), HasSubstr("is too large"));
  EXPECT_THAT(error_of("16777216T"), HasSubstr("'16777216T' is too large"));
}

// KB, MB, GB mean powers of 1000 elsewhere in H2 (cpu-reference's memory); a guess either way would
// be wrong for someone.
TEST(ByteSize, DecimalLookingUnitsAreRefusedWithWhatToWrite) {
  EXPECT_THAT(error_of("16MB"), HasSubstr("'16MB': write 16M or 16MiB (1024-based); MB would be ambiguous"));
  EXPECT_THAT(error_of("4kb"), HasSubstr("write 4k or 4kiB"));
}

TEST(ByteSize, TextUsesTheLargestWholeUnit) {
  EXPECT_EQ(byte_size_text(0), "0");
  EXPECT_EQ(byte_size_text(4), "4");
  EXPECT_EQ(byte_size_text(1536), "1536");
  EXPECT_EQ(byte_size_text(2048), "2KiB");
  EXPECT_EQ(byte_size_text(uint64_t{1} << 34), "16GiB");
}

}  // namespace
}  // namespace h2::tools
