// The cpu-reference plugin's environment configuration: sizes, per-device lists and every way a
// value can be wrong, each named in the error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "config.hpp"
#include "common.hpp"

namespace h2::cpu_reference {
namespace {

using testing::HasSubstr;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::string error_of(std::map<std::string, std::string> vars) {
  try {
    read_config(env_of(std::move(vars)));
  } catch (const PluginError& e) {
    EXPECT_EQ(e.status(), H2_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "the configuration was accepted";
  return "";
}

TEST(ParseSize, UnitsArePowersOf1024OrOf1000) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("2KiB"), 2048u);
  EXPECT_EQ(parse_size("3 MiB"), 3u << 20);
  EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("1TiB"), 1ull << 40);
  EXPECT_EQ(parse_size("2GB"), 2000000000u);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
}

TEST(ParseSize, RejectsWhatIsNotASize) {
  EXPECT_THROW(parse_size(""), std::invalid_argument);
  EXPECT_THROW(parse_size("GiB"), std::invalid_argument);
  EXPECT_THROW(parse_size("2XB"), std::invalid_argument);
  EXPECT_THROW(parse_size("0"), std::invalid_argument);
  EXPECT_THROW(parse_size("1.2.3GiB"), std::invalid_argument);
  EXPECT_THROW(parse_size("99999999TiB"), std::invalid_argument);
}

TEST(ReadConfig, DefaultsToOneDeviceOf4GiB) {
  Config config = read_config(env_of({}));
  EXPECT_EQ(config.memory_bytes, std::vector<uint64_t>{4ull << 30});
  EXPECT_FALSE(config.strict);
}

TEST(ReadConfig, OneSizeAppliesToEveryDevice) {
  Config config = read_config(env_of({{"H2_CPU_REFERENCE_DEVICES", "3"}, {"H2_CPU_REFERENCE_MEMORY", "1GiB"}}));
  EXPECT_EQ(config.memory_bytes, (std::vector<uint64_t>{1ull << 30, 1ull << 30, 1ull << 30}));
}

TEST(ReadConfig, AListGivesEachDeviceItsOwnCapacity) {
  Config config = read_config(env_of({{"H2_CPU_REFERENCE_MEMORY", "4GiB, 2GiB,1GiB"}}));
  EXPECT_EQ(config.memory_bytes, (std::vector<uint64_t>{4ull << 30, 2ull << 30, 1ull << 30}));
  Config same = read_config(env_of({{"H2_CPU_REFERENCE_MEMORY", "4GiB,2GiB"}, {"H2_CPU_REFERENCE_DEVICES", "2"}}));
  EXPECT_EQ(same.memory_bytes.size(), 2u);
}

TEST(ReadConfig, StrictModeFlag) {
  EXPECT_TRUE(read_config(env_of({{"H2_CPU_REFERENCE_STRICT", "1"}})).strict);
  EXPECT_TRUE(read_config(env_of({{"H2_CPU_REFERENCE_STRICT", "ON"}})).strict);
  EXPECT_FALSE(read_config(env_of({{"H2_CPU_REFERENCE_STRICT", "false"}})).strict);
}

TEST(ReadConfig, ThreadsAndBlocking) {
  Config config = read_config(env_of({{"H2_CPU_REFERENCE_THREADS", "3"}, {"H2_CPU_REFERENCE_BLOCKING", "yes"}}));
  EXPECT_EQ(config.threads, 3);
  EXPECT_TRUE(config.blocking);
  EXPECT_GE(read_config(env_of({})).threads, 1);
  EXPECT_FALSE(read_config(env_of({})).blocking);
}

TEST(ReadConfig, OperatorDtypesDefaultToAllFourFloatTypesOrTheList) {
  const uint32_t all = (1u << H2_DTYPE_F64) | (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16);
  EXPECT_EQ(read_config(env_of({})).op_dtypes, all);
  EXPECT_EQ(read_config(env_of({{"H2_CPU_REFERENCE_OP_DTYPES", "f32, f16,bf16"}})).op_dtypes,
            all & ~(1u << H2_DTYPE_F64));
}

TEST(ReadConfig, EveryBadValueNamesItsVariable) {
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_THREADS", "0"}}), HasSubstr("H2_CPU_REFERENCE_THREADS='0'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_BLOCKING", "sometimes"}}),
              HasSubstr("H2_CPU_REFERENCE_BLOCKING='sometimes'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_DEVICES", "three"}}),
              HasSubstr("H2_CPU_REFERENCE_DEVICES='three': expected a whole number from 1 to 64"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_DEVICES", "0"}}), HasSubstr("H2_CPU_REFERENCE_DEVICES='0'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_DEVICES", "2x"}}), HasSubstr("H2_CPU_REFERENCE_DEVICES='2x'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_MEMORY", "1GiB,lots"}}),
              HasSubstr("H2_CPU_REFERENCE_MEMORY='1GiB,lots': 'lots':"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_MEMORY", "1GiB,2GiB"}, {"H2_CPU_REFERENCE_DEVICES", "3"}}),
              HasSubstr("lists 2 sizes but H2_CPU_REFERENCE_DEVICES is 3"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_STRICT", "maybe"}}), HasSubstr("H2_CPU_REFERENCE_STRICT='maybe'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_OP_DTYPES", "f32,f8"}}),
              HasSubstr("H2_CPU_REFERENCE_OP_DTYPES='f32,f8': 'f8' is not one of f64, f32, f16, bf16"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_OP_DTYPES", ""}}), HasSubstr("H2_CPU_REFERENCE_OP_DTYPES=''"));
}

}  // namespace
}  // namespace h2::cpu_reference
