// `h2 conform` as CI and vendors run it: the quick suite on cpu-reference passes and writes its
// reports, the certificate verifies against the plugin file, and bad arguments are usage errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

using Result = h2::test::CliResult;

Result h2(const std::string& args) {
  return h2::test::run_h2(args);
}

TEST(H2Conform, QuickSuiteOnCpuReferencePassesAndWritesItsReports) {
  const fs::path dir = fs::temp_directory_path() / "h2-conform-cli-test";
  fs::remove_all(dir);
  Result r = h2("conform --plugin cpu-reference --quick --report-dir " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("CONFORMS"));
  EXPECT_THAT(r.output, HasSubstr("41/41 operators"));
  EXPECT_THAT(r.output, HasSubstr("gemm"));
  for (const char* file : {"report.json", "junit.xml", "certificate.json"}) ASSERT_TRUE(fs::exists(dir / file)) << file;

  nlohmann::json report = nlohmann::json::parse(std::ifstream(dir / "report.json"));
  EXPECT_EQ(report["passed"], true);
  EXPECT_EQ(report["totals"]["fail"], 0);
  EXPECT_GT(report["totals"]["pass"].get<int>(), 300);
  std::ifstream junit(dir / "junit.xml");
  std::string xml((std::istreambuf_iterator<char>(junit)), std::istreambuf_iterator<char>());
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"attention_backward\""));

  const std::string plugin = report["plugin"]["path"];
  Result ok = h2("conform --verify " + (dir / "certificate.json").string() + " --plugin " + plugin);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("certifies"));
  Result wrong = h2("conform --verify " + (dir / "certificate.json").string() + " --plugin " +
                    (fs::path(std::getenv("H2_TEST_FAKE_PLUGIN_DIR")) / "libh2-plugin-fake.so").string());
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.output, HasSubstr("the certificate is for another file"));
}

TEST(H2Conform, BadArgumentsAreUsageErrors) {
  Result no_plugin = h2("conform --quick");
  EXPECT_NE(no_plugin.exit_code, 0);
  EXPECT_THAT(no_plugin.output, HasSubstr("--plugin"));
  Result both = h2("conform --plugin cpu-reference --quick --full");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.output, HasSubstr("excludes"));
  Result ops = h2("conform --plugin cpu-reference --ops nosuchop");
  EXPECT_EQ(ops.exit_code, 2);
  EXPECT_THAT(ops.output, HasSubstr("'nosuchop' matches no operator"));
  Result dtypes = h2("conform --plugin cpu-reference --dtypes f99");
  EXPECT_EQ(dtypes.exit_code, 2);
  EXPECT_THAT(dtypes.output, HasSubstr("'f99' is not one of f32, f16, bf16"));
  Result missing = h2("conform --plugin /nonexistent/libh2-plugin-x.so --ops fill");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("not installed: no file at /nonexistent/libh2-plugin-x.so"));
}

// A copy of cpu-reference under another path, still calling itself cpu-reference, used to be compared
// with itself (devices are found by plugin name) and certified whatever it computed.
TEST(H2Conform, APluginNamedLikeTheReferenceIsRefused) {
  const fs::path dir = fs::temp_directory_path() / "h2-conform-same-name-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result listed = h2("devices --json --plugin cpu-reference");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const std::string original = nlohmann::json::parse(listed.output)["plugins"][0]["path"];
  const fs::path copy = dir / "libh2-plugin-my-fork.so";
  fs::copy_file(original, copy);
  const Result r = h2("conform --quick --ops fill --plugin " + copy.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("plugin " + copy.string() + " calls itself 'cpu-reference', the name of the reference"));
  fs::remove_all(dir);
}

}  // namespace
