// Plugin options (ABI 1.4) through the core: they reach the plugin and override its environment
// variables; an unknown key or a bad value fails the load naming it; a plugin older than 1.4 loads
// without options and refuses them by name instead of dropping them; the keys can be listed without
// initializing a plugin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using test::fake_plugin;
using testing::HasSubstr;

Runtime load(const std::string& spec, std::map<std::string, PluginOptions> options) {
  RuntimeOptions runtime_options;
  runtime_options.plugins = {spec};
  runtime_options.plugin_options = std::move(options);
  return Runtime(runtime_options);
}

TEST(PluginOptions, ReachCpuReference) {
  Runtime runtime = load("cpu-reference", {{"cpu-reference", {{"devices", "3"}, {"memory", "64MiB"}}}});
  ASSERT_TRUE(runtime.plugins().at(0).loaded()) << runtime.plugins().at(0).message;
  ASSERT_EQ(runtime.devices().size(), 3u);
  for (const Device& device : runtime.devices()) EXPECT_EQ(device.properties().total_memory_bytes, 64u << 20);
}

TEST(PluginOptions, AnOptionOverridesItsEnvironmentVariableAndNoOther) {
  test::ScopedEnv devices("H2_CPU_REFERENCE_DEVICES", "2");
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "32MiB");
  Runtime runtime = load("cpu-reference", {{"cpu-reference", {{"devices", "3"}}}});
  ASSERT_TRUE(runtime.plugins().at(0).loaded()) << runtime.plugins().at(0).message;
  ASSERT_EQ(runtime.devices().size(), 3u);                                     // the option
  EXPECT_EQ(runtime.devices()[0].properties().total_memory_bytes, 32u << 20);  // the variable
}

TEST(PluginOptions, AnUnknownKeyFailsNamingItAndTheKnownKeys) {
  Runtime runtime = load("cpu-reference", {{"cpu-reference", {{"memroy", "1GiB"}}}});
  const PluginInfo& info = runtime.plugins().at(0);
  EXPECT_EQ(info.state, PluginState::init_failed);
  EXPECT_THAT(info.message, HasSubstr("init failed (invalid argument): unknown option 'memroy' for plugin "
                                      "cpu-reference: its keys are devices, memory, strict, blocking, op_dtypes, "
                                      "threads, collectives_in_place"));
}

TEST(PluginOptions, ABadValueFailsNamingTheKeyAndTheValue) {
  Runtime runtime = load("cpu-reference", {{"cpu-reference", {{"memory", "2XB"}}}});
  const PluginInfo& info = runtime.plugins().at(0);
  EXPECT_EQ(info.state, PluginState::init_failed);
  EXPECT_THAT(info.message, HasSubstr("option memory='2XB': '2XB': unknown unit 'XB'"));
}

// The fake plugin is C, as a vendor's would be: the options cross the ABI as H2_Option elements.
TEST(PluginOptions, ReachAPluginWrittenInC) {
  {
    Runtime runtime = load(fake_plugin("fake").string(), {{"fake", {{"devices", "1"}}}});
    ASSERT_TRUE(runtime.plugins().at(0).loaded()) << runtime.plugins().at(0).message;
    EXPECT_EQ(runtime.devices().size(), 1u);
  }
  Runtime refused = load(fake_plugin("fake").string(), {{"fake", {{"devices", "0"}}}});
  EXPECT_THAT(refused.plugins().at(0).message, HasSubstr("option devices='0': expected 1 to 9"));
}

TEST(PluginOptions, APluginOlderThan1_4LoadsWithoutOptionsAndRefusesThemByName) {
  {
    Runtime plain = load(fake_plugin("minor-3").string(), {});
    ASSERT_TRUE(plain.plugins().at(0).loaded()) << plain.plugins().at(0).message;
    EXPECT_EQ(plain.plugins().at(0).abi_minor, 3u);
  }

  Runtime given = load(fake_plugin("minor-3").string(), {{"minor-3", {{"devices", "1"}, {"speed", "high"}}}});
  const PluginInfo& info = given.plugins().at(0);
  EXPECT_EQ(info.state, PluginState::init_failed);
  EXPECT_THAT(info.message, HasSubstr("minor-3 speaks ABI 1.3, which has no plugin options (they came in 1.4), so it "
                                      "cannot be given devices, speed"));
  Runtime oldest = load(fake_plugin("old-minor").string(), {{"old-minor", {{"devices", "1"}}}});
  EXPECT_THAT(oldest.plugins().at(0).message, HasSubstr("old-minor speaks ABI 1.0"));
}

TEST(PluginOptions, OptionsForAPluginNotLoadedAreNotUsed) {
  Runtime runtime = load("cpu-reference", {{"cuda", {{"anything", "1"}}}});
  EXPECT_TRUE(runtime.plugins().at(0).loaded()) << runtime.plugins().at(0).message;
}

TEST(PluginOptions, AStringWithANulCharacterIsRefusedBeforeItIsCutShort) {
  Runtime runtime = load("cpu-reference", {{"cpu-reference", {{"memory", std::string("1GiB\0,2GiB", 10)}}}});
  EXPECT_THAT(runtime.plugins().at(0).message, HasSubstr("option 'memory' for cpu-reference holds a NUL character"));
}

// A plugin is initialized once per process: a second Runtime asking for other options must not get
// the first one's instance as if it had those options.
TEST(PluginOptions, APluginLoadedWithOtherOptionsIsNotSharedSilently) {
  Runtime first = load("cpu-reference", {{"cpu-reference", {{"devices", "2"}}}});
  ASSERT_TRUE(first.plugins().at(0).loaded()) << first.plugins().at(0).message;
  Runtime same = load("cpu-reference", {{"cpu-reference", {{"devices", "2"}}}});
  EXPECT_TRUE(same.plugins().at(0).loaded()) << same.plugins().at(0).message;
  Runtime other = load("cpu-reference", {});
  EXPECT_EQ(other.plugins().at(0).state, PluginState::init_failed);
  EXPECT_THAT(other.plugins().at(0).message,
              HasSubstr("cpu-reference is already loaded in this process with devices=2, not with no options"));

  // A plugin older than 1.4 is refused for what it cannot take, live or not.
  Runtime older = load(fake_plugin("minor-3").string(), {});
  Runtime given = load(fake_plugin("minor-3").string(), {{"minor-3", {{"devices", "1"}}}});
  EXPECT_THAT(given.plugins().at(0).message, HasSubstr("minor-3 speaks ABI 1.3, which has no plugin options"));
}

TEST(PluginOptions, CpuReferenceListsItsKeysWithoutInitializing) {
  test::ScopedEnv broken("H2_CPU_REFERENCE_MEMORY", "not a size");  // initialize would fail
  const PluginOptionListing listing = list_plugin_options("cpu-reference");
  EXPECT_EQ(listing.error, "");
  EXPECT_TRUE(listing.listed);
  EXPECT_EQ(listing.name, "cpu-reference");
  std::vector<std::string> keys;
  for (const PluginOptionInfo& option : listing.options) keys.push_back(option.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"devices", "memory", "strict", "blocking", "op_dtypes", "threads",
                                            "collectives_in_place"}));
  const auto memory = std::find_if(listing.options.begin(), listing.options.end(),
                                   [](const PluginOptionInfo& o) { return o.key == "memory"; });
  EXPECT_EQ(memory->default_value, "4GiB");
  EXPECT_THAT(memory->description, HasSubstr("H2_CPU_REFERENCE_MEMORY"));
}

TEST(PluginOptions, ListingSaysWhatEachPluginOffers) {
  const PluginOptionListing fake = list_plugin_options(fake_plugin("fake").string());
  EXPECT_TRUE(fake.listed);
  ASSERT_EQ(fake.options.size(), 1u);
  EXPECT_EQ(fake.options[0].key, "devices");
  EXPECT_EQ(fake.options[0].default_value, "2");

  const PluginOptionListing older = list_plugin_options(fake_plugin("minor-3").string());
  EXPECT_EQ(older.error, "");
  EXPECT_FALSE(older.listed);  // its table ends before option_list, whatever lies beyond it
  EXPECT_EQ(older.abi_minor, 3u);

  EXPECT_THAT(list_plugin_options("ghost").error, HasSubstr("no libh2-plugin-ghost.so in the plugin search path"));
  EXPECT_THAT(list_plugin_options(fake_plugin("abi-major").string()).error, HasSubstr("ABI mismatch"));
}

}  // namespace
}  // namespace h2
