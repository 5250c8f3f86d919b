// `h2 devices` as a user runs it: the listing, the JSON, and for each broken plugin its own message
// and a non-zero exit, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <string>
#include "cli_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
using testing::Not;

using Result = h2::test::CliResult;
using h2::test::env_or_fail;

Result h2(const std::string& args, const std::string& environment = "") {
  return h2::test::run_h2(args, environment);
}
std::string env(const char* name) {
  return env_or_fail(name);
}

std::string fake(const std::string& name) {
  return (fs::path(env("H2_TEST_FAKE_PLUGIN_DIR")) / ("libh2-plugin-" + name + ".so")).string();
}

TEST(H2Devices, ListsTheConfiguredCpuReferenceDevicesAndCapacities) {
  Result r = h2("devices", "H2_CPU_REFERENCE_MEMORY=1GiB,512MiB,256MiB");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cpu-reference  1.1"));
  EXPECT_THAT(r.output, HasSubstr("loaded"));
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:0"));
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:2"));
  EXPECT_THAT(r.output, Not(HasSubstr("cpu-reference:3")));
  EXPECT_THAT(r.output, HasSubstr("1.00 GiB"));
  EXPECT_THAT(r.output, HasSubstr("512.00 MiB"));
  EXPECT_THAT(r.output, HasSubstr("256.00 MiB"));
}

TEST(H2Devices, JsonHasEveryDeviceWithItsProperties) {
  Result r = h2("devices --json", "H2_CPU_REFERENCE_DEVICES=2 H2_CPU_REFERENCE_MEMORY=64MiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["abi"]["major"], 1);
  // Other plugins of the build (CUDA) may be listed too.
  const auto found = std::find_if(j["plugins"].begin(), j["plugins"].end(),
                                  [](const auto& p) { return p["name"] == "cpu-reference"; });
  ASSERT_NE(found, j["plugins"].end()) << r.output;
  const auto& plugin = *found;
  EXPECT_EQ(plugin["state"], "loaded");
  ASSERT_EQ(plugin["devices"].size(), 2u);
  for (const auto& device : plugin["devices"]) {
    EXPECT_EQ(device["total_memory_bytes"], 64u << 20);
    EXPECT_EQ(device["kind"], "cpu");
    EXPECT_THAT(device["supported_dtypes"].get<std::vector<std::string>>(), testing::Contains("bf16"));
  }
}

// The CUDA plugin builds without a GPU; on such a machine it must say why it has no device, exit
// non-zero when asked for by name, and leave the listing of every plugin working.
TEST(H2Devices, CudaPluginSaysPlainlyWhenThereIsNoGpu) {
  const char* cuda = std::getenv("H2_TEST_CUDA_PLUGIN");
  if (cuda == nullptr) GTEST_SKIP() << "the CUDA plugin is not part of this build";
  Result named = h2(std::string("devices --json --plugin ") + cuda);
  auto j = nlohmann::json::parse(named.output);
  ASSERT_EQ(j["plugins"].size(), 1u) << named.output;
  const auto& plugin = j["plugins"][0];
  EXPECT_EQ(plugin["name"], "cuda");
  if (plugin["state"] == "loaded") {  // a machine with a GPU
    EXPECT_EQ(named.exit_code, 0) << named.output;
    EXPECT_GE(plugin["devices"].size(), 1u);
    EXPECT_EQ(plugin["devices"][0]["kind"], "gpu");
    return;
  }
  EXPECT_EQ(named.exit_code, 1) << named.output;
  EXPECT_THAT(plugin["state"].get<std::string>(), testing::AnyOf("vendor runtime missing", "no device"));
  EXPECT_THAT(plugin["message"].get<std::string>(),
              testing::AnyOf(HasSubstr("no NVIDIA driver"), HasSubstr("no CUDA device")));
  Result all = h2("devices");
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("cpu-reference:0"));
}

struct BrokenCase {
  const char* plugin;
  const char* message;
};

class BrokenPlugin : public testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPlugin, PrintsItsOwnMessageAndExitsNonZero) {
  const BrokenCase& c = GetParam();
  const std::string path = std::string(c.plugin).starts_with("/") ? c.plugin : fake(c.plugin);
  for (const char* format : {"", "--json"}) {
    Result r = h2(std::string("devices ") + format + " --plugin " + path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachFailure, BrokenPlugin,
    testing::Values(
        BrokenCase{"/nonexistent/libh2-plugin-gone.so", "not installed: no file at /nonexistent/libh2-plugin-gone.so"},
        BrokenCase{"/etc/hostname", "not a shared library: /etc/hostname has no ELF header"},
        BrokenCase{"no-entry", "entry point missing: the library does not export h2_plugin_get_api"},
        BrokenCase{"undefined-symbol", "load failed: the dynamic loader refused it"},
        BrokenCase{"abi-major", "ABI mismatch (plugin 2.3, core 1.1)"},
        BrokenCase{"abi-minor-newer", "ABI mismatch (plugin 1.7, core 1.1)"},
        BrokenCase{"small-table", "invalid API table: API table struct_size 64 is smaller"},
        BrokenCase{"null-slot", "invalid API table: required slot 'memset_async' is NULL"},
        BrokenCase{"init-fails", "init failed (device error): simulated driver failure"},
        BrokenCase{"runtime-missing", "vendor runtime missing: cannot load libh2-absent-vendor-runtime.so.1"}),
    [](const testing::TestParamInfo<BrokenCase>& info) {
      std::string name = fs::path(info.param.plugin).stem().string();
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

TEST(H2Devices, UnknownPluginNameSaysWhereItLooked) {
  Result r = h2("devices --plugin nosuch");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("not installed: no libh2-plugin-nosuch.so in the plugin search path"));
}

TEST(H2Devices, AnOlderMinorPluginLoads) {
  Result r = h2("devices --plugin " + fake("old-minor"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("old-minor:1"));
}

TEST(H2Devices, DiscoveryFailsWhenAPluginInThePathIsBroken) {
  Result r = h2("devices", "H2_PLUGIN_PATH=" + env("H2_PLUGIN_PATH") + ":" + env("H2_TEST_FAKE_PLUGIN_DIR"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:0"));
  EXPECT_THAT(r.output, HasSubstr("abi-major: ABI mismatch"));
}

TEST(H2Devices, DiscoverySucceedsWhenAPluginOnlyLacksItsVendorRuntime) {
  // A machine without a vendor's runtime is not broken: listing everything still exits 0.
  Result r = h2("devices", "H2_PLUGIN_PATH=" + env("H2_PLUGIN_PATH") + ":" + fake("runtime-missing"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("runtime-missing: vendor runtime missing"));
}

TEST(H2Devices, BadPluginConfigurationIsReportedNotCrashed) {
  Result r = h2("devices", "H2_CPU_REFERENCE_DEVICES=lots");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("H2_CPU_REFERENCE_DEVICES='lots'"));
}

TEST(H2Devices, WrongFlagsAreUsageErrors) {
  Result bad_flag = h2("devices --bogus");
  EXPECT_NE(bad_flag.exit_code, 0);
  EXPECT_THAT(bad_flag.output, HasSubstr("--bogus"));
  Result no_command = h2("");
  EXPECT_NE(no_command.exit_code, 0);
  EXPECT_THAT(no_command.output, HasSubstr("a command is required"));
  Result unknown = h2("frobnicate");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("frobnicate"));
}

TEST(H2Devices, EmptySearchPathSaysNoPluginsWereFound) {
  if (fs::exists(H2_INSTALLED_PLUGIN_DIR)) GTEST_SKIP() << "H2 is installed on this machine; its plugins are found";
  fs::path empty = fs::temp_directory_path() / "h2-empty-plugin-dir";
  fs::create_directories(empty);
  Result r = h2("devices", "H2_PLUGIN_PATH=" + empty.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("no plugins found"));
}

}  // namespace
