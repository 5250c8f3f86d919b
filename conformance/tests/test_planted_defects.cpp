// The suite must be shown to catch bugs: each planted defect of the test plugin is reported as
// failed, crashed or timed out on the operator it breaks, and a plugin that only rounds
// differently (a blocked fp32 gemm) still passes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "h2/conformance.hpp"

namespace h2::conformance {
namespace {

using testing::HasSubstr;

std::string defective_plugin() {
  const char* path = std::getenv("H2_TEST_DEFECTIVE_PLUGIN");
  if (path == nullptr) throw std::runtime_error("H2_TEST_DEFECTIVE_PLUGIN is not set; run through meson test");
  return path;
}

SuiteReport run_with_defect(const std::string& defect, const std::vector<std::string>& ops,
                            std::vector<DType> dtypes = {DType::f32, DType::bf16}, double timeout = 60) {
  setenv("H2_PLANTED_DEFECT", defect.c_str(), 1);
  SuiteOptions options;
  options.plugin = defective_plugin();
  options.ops = ops;
  options.dtypes = std::move(dtypes);
  options.op_timeout_seconds = timeout;
  SuiteReport report = run_suite(options);
  unsetenv("H2_PLANTED_DEFECT");
  return report;
}

// The cases of `op` that did not pass, with their messages, for failure output.
std::string problems(const SuiteReport& report, const std::string& op) {
  std::string text;
  for (const CaseResult& r : report.cases)
    if (r.op == op && r.state != CaseState::pass)
      text += std::string(state_name(r.state)) + ": " + r.dtype + " " + r.name + ": " + r.message + "\n";
  return text;
}

size_t count(const SuiteReport& report, const std::string& op, CaseState state) {
  size_t n = 0;
  for (const CaseResult& r : report.cases) n += r.op == op && r.state == state;
  return n;
}

TEST(PlantedDefects, TheDefectivePluginWithoutADefectConforms) {
  SuiteReport report = run_with_defect("none", {"softmax", "gemm", "layer_norm"});
  EXPECT_TRUE(report.passed()) << problems(report, "softmax") << problems(report, "gemm")
                               << problems(report, "layer_norm");
  EXPECT_EQ(report.plugin.name, "cpu-reference-defective");
}

TEST(PlantedDefects, SoftmaxOffByOneFails) {
  SuiteReport report = run_with_defect("softmax_off_by_one", {"softmax"});
  EXPECT_FALSE(report.passed());
  EXPECT_GT(count(report, "softmax", CaseState::fail), 0u) << problems(report, "softmax");
}

TEST(PlantedDefects, Bf16TruncationFailsBf16AndOnlyBf16) {
  SuiteReport report = run_with_defect("bf16_truncation", {"copy", "gemm"}, {DType::f32, DType::bf16});
  EXPECT_FALSE(report.passed());
  bool bf16_failed = false;
  for (const CaseResult& r : report.cases) {
    if (r.state == CaseState::fail) {
      EXPECT_EQ(r.dtype, "bf16") << r.op << " " << r.name << ": " << r.message;
      bf16_failed = true;
    }
  }
  EXPECT_TRUE(bf16_failed) << problems(report, "copy");
}

TEST(PlantedDefects, Fp16AccumulationFails) {
  SuiteReport report = run_with_defect("fp16_accumulation", {"gemm"}, {DType::f16});
  EXPECT_GT(count(report, "gemm", CaseState::fail), 0u) << problems(report, "gemm");
}

TEST(PlantedDefects, WritingIntoAnInputFails) {
  SuiteReport report = run_with_defect("writes_input", {"layer_norm"}, {DType::f32});
  EXPECT_GT(count(report, "layer_norm", CaseState::fail), 0u);
  bool named = false;
  for (const CaseResult& r : report.cases) named |= r.message.find("input x was modified") != std::string::npos;
  EXPECT_TRUE(named) << problems(report, "layer_norm");
}

TEST(PlantedDefects, IgnoringStridesFails) {
  SuiteReport report = run_with_defect("ignores_strides", {"unary"}, {DType::f32});
  EXPECT_GT(count(report, "unary", CaseState::fail), 0u) << problems(report, "unary");
}

TEST(PlantedDefects, IgnoringTheStreamFails) {
  SuiteReport report = run_with_defect("ignores_stream", {"rms_norm"}, {DType::f32});
  EXPECT_GT(count(report, "rms_norm", CaseState::fail), 0u) << problems(report, "rms_norm");
}

TEST(PlantedDefects, ACrashIsReportedAndTheSuiteGoesOn) {
  SuiteReport report = run_with_defect("crash_on_shape", {"gemm", "fill"}, {DType::f32});
  EXPECT_GT(count(report, "gemm", CaseState::crashed), 0u) << problems(report, "gemm");
  bool named = false;
  for (const CaseResult& r : report.cases)
    if (r.state == CaseState::crashed && r.message.find("gemm crashed with SIGSEGV in this case") != std::string::npos)
      named = r.name == "A and B stored transposed";
  EXPECT_TRUE(named) << problems(report, "gemm");
  EXPECT_EQ(count(report, "fill", CaseState::pass), 4u) << "the operator after the crash still ran";
}

TEST(PlantedDefects, AHangIsTimedOutAndTheSuiteGoesOn) {
  SuiteReport report = run_with_defect("hang", {"cross_entropy", "fill"}, {DType::f32}, 8);
  EXPECT_GT(count(report, "cross_entropy", CaseState::timed_out), 0u) << problems(report, "cross_entropy");
  EXPECT_EQ(count(report, "fill", CaseState::pass), 4u);
}

// Defects that inputs of ordinary magnitude never showed (issue 27's first classes): each is caught
// by the case named, in the dtypes given.
struct EdgeDefect {
  const char* defect;
  const char* op;
  const char* case_name;
  std::vector<DType> dtypes;
};

TEST(PlantedDefects, EdgeCasesCatchWhatOrdinaryInputsMiss) {
  const EdgeDefect defects[] = {
      {"softmax_without_max", "softmax", "large logits", {DType::f32}},
      {"saturating_f16", "copy", "cast from f32 past the largest finite value", {DType::f16}},
      {"eps_outside_sqrt", "rms_norm", "small rows, eps dominates", {DType::f32}},
      {"eps_outside_sqrt", "layer_norm", "small rows, eps dominates", {DType::f32}},
      // Every gemm with beta 0: C starts as NaN, which 0 * C propagates.
      {"gemm_reads_c", "gemm", "A and B stored transposed", {DType::f32}},
      {"ignored_rows_backward", "cross_entropy_backward", "label smoothing 0.1, ignore index 3", {DType::f32}},
      {"reduce_ignores_strides", "reduce", "sum of a transposed view", {DType::f32}},
      {"flushes_subnormals", "copy", "cast from f32 into the subnormal range", {DType::f16}},
      {"flushes_subnormals", "reduce", "sum of 4096 subnormals", {DType::f16}},
      {"flushes_subnormals", "unary", "neg keeps subnormals", {DType::bf16}},
      {"reduce_skips_nan",
       "reduce",
       "sum over rows to f32 (bias gradient) [32, 128], NaN and infinities in every input",
       {DType::f32}},
  };
  for (const EdgeDefect& d : defects) {
    SCOPED_TRACE(std::string(d.defect) + " on " + d.op);
    SuiteReport report = run_with_defect(d.defect, {d.op}, d.dtypes);
    bool caught = false;
    for (const CaseResult& r : report.cases) caught |= r.name == d.case_name && r.state == CaseState::fail;
    EXPECT_TRUE(caught) << problems(report, d.op);
  }
}

TEST(PlantedDefects, AnEventThatCompletesWhenItsWorkStartsFails) {
  SuiteReport report = run_with_defect("early_event", {"streams"}, {DType::f32});
  bool caught = false;
  for (const CaseResult& r : report.cases)
    caught |=
        r.name == "an event completes when its work has finished, not when it started" && r.state == CaseState::fail;
  EXPECT_TRUE(caught) << problems(report, "streams");
}

// Correct but different: fp32 sums in another order than the reference's fp64 ones. Each must pass,
// and must really compute differently (an error beyond the reference's own single rounding somewhere).
void expect_passes_computing_differently(const std::string& defect, const std::string& op) {
  SuiteReport report = run_with_defect(defect, {op}, {DType::f32, DType::f16, DType::bf16});
  EXPECT_TRUE(report.passed()) << problems(report, op);
  EXPECT_EQ(count(report, op, CaseState::fail), 0u);
  bool different = false;
  for (const CaseResult& r : report.cases)
    for (const OutputError& e : r.outputs) different |= e.max_abs_error > e.reference_max_abs_error;
  EXPECT_TRUE(different) << defect << " computed what the reference computes";
}

TEST(PlantedDefects, ABlockedFp32GemmRoundsDifferentlyAndStillPasses) {
  expect_passes_computing_differently("blocked_fp32_gemm", "gemm");
}

TEST(PlantedDefects, AReversedFp32ReductionRoundsDifferentlyAndStillPasses) {
  expect_passes_computing_differently("reversed_fp32_reduce", "reduce");
}

}  // namespace
}  // namespace h2::conformance
