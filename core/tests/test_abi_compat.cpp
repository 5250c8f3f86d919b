// The ABI compatibility rule (plugin_abi.h, section 1), checked against a made-up history in which
// the core is at 1.2 with round sizes, so the rule is tested apart from the real table sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <set>

#include "abi_compat.hpp"
#include "h2/op_registry.hpp"
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
  EXPECT_EQ(history.table_size_by_minor.back(), sizeof(H2_PluginApi));
  EXPECT_EQ(check_abi(H2_ABI_MAJOR, H2_ABI_MINOR, sizeof(H2_PluginApi), history).verdict, AbiVerdict::compatible);
}

// Each minor's sizes are frozen (plugin_abi.h asserts them too); these say which fields a 1.4 reader
// may use and that the array elements are laid out as H2_ARRAY_AT steps through them.
TEST(AbiCompat, Minor4AppendsTheOptionFieldsAndTheOptionListSlot) {
  EXPECT_EQ(H2_INIT_ARGS_SIZE_1_4, offsetof(H2_InitArgs, option_count) + sizeof(size_t));
  EXPECT_GE(offsetof(H2_InitArgs, options), H2_INIT_ARGS_SIZE_1_0);
  EXPECT_EQ(H2_PLUGIN_API_SIZE_1_4, offsetof(H2_PluginApi, option_list) + sizeof(void*));
  EXPECT_GT(H2_PLUGIN_API_SIZE_1_4, H2_PLUGIN_API_SIZE_1_3);
  EXPECT_EQ(H2_OPTION_SIZE_1_4, sizeof(H2_Option));
  EXPECT_EQ(H2_OPTION_INFO_SIZE_1_4, sizeof(H2_OptionInfo));
}

// 1.5 appends one slot, the collective table, which covers every slot it has.
TEST(AbiCompat, Minor5AppendsTheCollectiveTable) {
  EXPECT_EQ(H2_PLUGIN_API_SIZE_1_5, H2_PLUGIN_API_SIZE_1_4 + sizeof(void*));
  EXPECT_EQ(H2_COLLECTIVE_TABLE_SIZE_1_5, sizeof(H2_CollectiveTable));
}

// 1.7 appends one slot, mem_export_dmabuf, the last the table has.
TEST(AbiCompat, Minor7AppendsTheDmaBufExport) {
  EXPECT_EQ(H2_PLUGIN_API_SIZE_1_6, H2_PLUGIN_API_SIZE_1_5);
  EXPECT_EQ(H2_PLUGIN_API_SIZE_1_7, H2_PLUGIN_API_SIZE_1_6 + sizeof(void*));
  EXPECT_EQ(H2_PLUGIN_API_SIZE_1_7, sizeof(H2_PluginApi));
}

// A writer of a later minor may hand out larger elements: H2_ARRAY_AT follows their struct_size.
TEST(AbiCompat, ArrayElementsAreSteppedByTheirStructSize) {
  struct LaterOption {  // an H2_Option as a later minor might extend it
    H2_Option known;
    uint64_t appended;
  };
  LaterOption later[2] = {{{sizeof(LaterOption), "a", "1"}, 7}, {{sizeof(LaterOption), "b", "2"}, 8}};
  const H2_Option* first = &later[0].known;
  EXPECT_STREQ(H2_ARRAY_AT(H2_Option, first, 1)->key, "b");
  EXPECT_STREQ(H2_ARRAY_AT(H2_Option, first, 1)->value, "2");
}

}  // namespace

namespace {

// The one list of operators (h2/plugin_ops.h): ids 1..H2_OP_COUNT in order, each named once, and the
// names the core reports are the table's slot names.
TEST(OperatorRegistry, NamesEveryIdOnceInOrder) {
  const auto ops = h2::all_ops();
  ASSERT_EQ(ops.size(), static_cast<size_t>(H2_OP_COUNT));
  std::set<std::string_view> names;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(ops[i]), i + 1);
    const std::string_view name = h2::op_name(ops[i]);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    EXPECT_EQ(h2::op_by_name(name), ops[i]);
    EXPECT_GE(h2::op_minor(ops[i]), 1);
  }
  EXPECT_EQ(h2::op_name(H2_OP_GEMM), "gemm");
  EXPECT_EQ(h2::op_name(H2_OP_SCATTER_ADD), "scatter_add");
  EXPECT_EQ(h2::op_name(static_cast<H2_Op>(H2_OP_COUNT + 1)), "");
  EXPECT_FALSE(h2::op_by_name("matmul").has_value());
  EXPECT_EQ(H2_OP_COUNT_1_1, 39);
}

}  // namespace
