// The cpu-reference plugin's configuration from its environment variables and its options (ABI 1.4):
// sizes, per-device lists, an option over its variable, and every way a value can be wrong, each named
// in the error where the user wrote it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common.hpp"
#include "config.hpp"
#include "options.hpp"

namespace h2::cpu_reference {
namespace {

using testing::HasSubstr;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

Config read_config(const EnvLookup& env) {
  return h2::cpu_reference::read_config({}, env);
}

std::string error_of(std::map<std::string, std::string> vars, const std::map<std::string, std::string>& options = {}) {
  try {
    h2::cpu_reference::read_config(options, env_of(std::move(vars)));
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

TEST(ReadConfig, CollectivesRunInPlaceFrom64KiBOrTheSizeGivenOrNever) {
  EXPECT_EQ(read_config(env_of({})).collectives_in_place, 64u << 10);
  EXPECT_EQ(read_config(env_of({{"H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", "1MiB"}})).collectives_in_place, 1u << 20);
  EXPECT_EQ(read_config(env_of({{"H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", "off"}})).collectives_in_place, 0u);
  EXPECT_EQ(read_config(env_of({{"H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", "0"}})).collectives_in_place, 0u);
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", "lots"}}),
              HasSubstr("H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE='lots'"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE", "lots"}}), HasSubstr("0/off for never"));
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

TEST(ReadConfig, AnOptionOverridesItsVariableAndNoOther) {
  const Config config = h2::cpu_reference::read_config(
      {{"devices", "3"}, {"strict", "on"}},
      env_of(
          {{"H2_CPU_REFERENCE_DEVICES", "2"}, {"H2_CPU_REFERENCE_STRICT", "0"}, {"H2_CPU_REFERENCE_MEMORY", "1GiB"}}));
  EXPECT_EQ(config.memory_bytes, (std::vector<uint64_t>{1ull << 30, 1ull << 30, 1ull << 30}));
  EXPECT_TRUE(config.strict);
}

TEST(ReadConfig, ABadOptionNamesItsKeyAndValue) {
  EXPECT_THAT(error_of({}, {{"memory", "1GiB,lots"}}), HasSubstr("option memory='1GiB,lots': 'lots':"));
  EXPECT_THAT(error_of({{"H2_CPU_REFERENCE_MEMORY", "1GiB,2GiB"}}, {{"devices", "3"}}),
              HasSubstr("H2_CPU_REFERENCE_MEMORY='1GiB,2GiB': lists 2 sizes but option devices is 3"));
}

// The listed keys and the keys read_config reads are the same set: a key read but not listed would
// be refused as unknown at initialize, a key listed but not read would be accepted and ignored.
TEST(Options, TheListedKeysAreExactlyTheKeysTheConfigurationReads) {
  std::vector<std::string> listed;
  for (size_t i = 0; i < option_count(); ++i) listed.push_back(option_infos()[i].key);
  std::vector<std::string> read;
  h2::cpu_reference::read_config([&](const std::string& key) -> std::optional<Setting> {
    read.push_back(key);
    return std::nullopt;
  });
  std::sort(listed.begin(), listed.end());
  std::sort(read.begin(), read.end());
  EXPECT_EQ(listed, read);
  for (const std::string& key : listed)
    EXPECT_THAT(error_of({}, {{key, "?"}}), HasSubstr("option " + key + "='?'")) << key;
}

TEST(Options, EachKeyHasTheVariableOfItsName) {
  EXPECT_EQ(option_variable("memory"), "H2_CPU_REFERENCE_MEMORY");
  EXPECT_EQ(option_variable("op_dtypes"), "H2_CPU_REFERENCE_OP_DTYPES");
  for (size_t i = 0; i < option_count(); ++i)
    EXPECT_THAT(option_infos()[i].description, HasSubstr(option_variable(option_infos()[i].key)));
}

TEST(Options, AnOverriddenVariableIsReportedOnlyWhenItDiffers) {
  const EnvLookup env = env_of({{"H2_CPU_REFERENCE_THREADS", "4"}, {"H2_CPU_REFERENCE_MEMORY", "1GiB"}});
  EXPECT_EQ(overridden_variables({{"threads", "2"}, {"memory", "1GiB"}, {"strict", "1"}}, env),
            std::vector<std::string>{"option threads='2' overrides H2_CPU_REFERENCE_THREADS='4'"});
}

}  // namespace
}  // namespace h2::cpu_reference
