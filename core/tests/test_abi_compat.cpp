// The ABI compatibility rule (plugin_abi.h, section 1), checked against a made-up history in which
// the core is at 1.2 with round sizes, so the rule is tested apart from the real table sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "abi_compat.hpp"
#include "h2/plugin_abi.h"

using h2::detail::AbiHistory;
using h2::detail::AbiVerdict;
using h2::detail::check_abi;
using testing::HasSubstr;

namespace {

const AbiHistory kCoreAt1_2{1, {100, 140, 180}};

TEST(AbiCompat, SameVersionWithFullTableIsCompatible) {
  EXPECT_EQ(check_abi(1, 2, 180, kCoreAt1_2).verdict, AbiVerdict::compatible);
}

TEST(AbiCompat, OlderMinorWithItsOwnSmallerTableIsCompatible) {
  EXPECT_EQ(check_abi(1, 0, 100, kCoreAt1_2).verdict, AbiVerdict::compatible);
  EXPECT_EQ(check_abi(1, 1, 140, kCoreAt1_2).verdict, AbiVerdict::compatible);
}

TEST(AbiCompat, TableSmallerThanItsMinorRequiresIsRejected) {
  auto check = check_abi(1, 1, 120, kCoreAt1_2);
  EXPECT_EQ(check.verdict, AbiVerdict::table_too_small);
  EXPECT_THAT(check.message, HasSubstr("struct_size 120"));
  EXPECT_THAT(check.message, HasSubstr("140 bytes ABI 1.1 requires"));
}

TEST(AbiCompat, NewerMinorIsRejectedNamingBothVersions) {
  auto check = check_abi(1, 3, 220, kCoreAt1_2);
  EXPECT_EQ(check.verdict, AbiVerdict::version_mismatch);
  EXPECT_THAT(check.message, HasSubstr("plugin 1.3, core 1.2"));
  EXPECT_THAT(check.message, HasSubstr("newer H2 core"));
}

TEST(AbiCompat, OtherMajorIsRejectedNamingBothVersions) {
  auto older = check_abi(0, 9, 500, kCoreAt1_2);
  EXPECT_EQ(older.verdict, AbiVerdict::version_mismatch);
  EXPECT_THAT(older.message, HasSubstr("plugin 0.9, core 1.2"));
  auto newer = check_abi(2, 0, 500, kCoreAt1_2);
  EXPECT_EQ(newer.verdict, AbiVerdict::version_mismatch);
  EXPECT_THAT(newer.message, HasSubstr("plugin 2.0, core 1.2"));
}

TEST(AbiCompat, ThisCoresHistoryEndsAtItsOwnVersion) {
  const AbiHistory& history = h2::detail::core_abi_history();
  EXPECT_EQ(history.major, H2_ABI_MAJOR);
  EXPECT_EQ(history.table_size_by_minor.size(), H2_ABI_MINOR + 1u);
  EXPECT_EQ(history.table_size_by_minor.back(), H2_STRUCT_SIZE(H2_PluginApi, mem_free_async));
  EXPECT_EQ(check_abi(H2_ABI_MAJOR, H2_ABI_MINOR, sizeof(H2_PluginApi), history).verdict, AbiVerdict::compatible);
}

}  // namespace
