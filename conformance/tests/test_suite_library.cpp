// The suite as a library: the tolerance policy on hand-made values, waivers, certificates, and how
// a plugin that provides only part of the operators is reported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cases.hpp"
#include "h2/conformance.hpp"
#include "h2/half.hpp"
#include "h2/op_registry.hpp"
#include "tolerance.hpp"
#include "waivers.hpp"

namespace h2::conformance {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

fs::path temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("h2-conformance-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// ---- Tolerance policy ----

TEST(Tolerance, OneUlpOfFinalRoundingPassesTwoFail) {
  const double exact = 1 + 0x1p-9;  // between two bf16 values, a quarter ulp above 1
  const ErrorModel elementwise{.magnitude = Magnitude::exact, .c = 0, .n = 0};
  EXPECT_TRUE(compare_output("y", DType::bf16, {1}, elementwise, {1.0}, {exact}, {1.0}, {}).pass);
  const double far_neighbour = 1 + 0x1p-7;  // the other bf16 neighbour: faithful, not correct, rounding
  EXPECT_TRUE(compare_output("y", DType::bf16, {1}, elementwise, {far_neighbour}, {exact}, {1.0}, {}).pass);
  const double two_ulps_off = 1 + 0x1p-6;
  EXPECT_FALSE(compare_output("y", DType::bf16, {1}, elementwise, {two_ulps_off}, {exact}, {1.0}, {}).pass);
}

// Every value rounded toward zero stays within one ulp, so only the rounding-bias check sees it.
TEST(Tolerance, RoundingTowardZeroIsCaughtByItsBias) {
  const ErrorModel elementwise{.magnitude = Magnitude::exact, .c = 0, .n = 0};
  HostValues exact, nearest, truncated;
  for (int i = 0; i < 500; ++i) {
    const double x = (i % 2 ? -1 : 1) * (1 + 0.001953 * i + 1e-6);  // distinct, between bf16 values
    exact.push_back(x);
    nearest.push_back(bf16_to_f32(f32_to_bf16(static_cast<float>(x))));
    truncated.push_back(std::trunc(x * 128) / 128);  // toward zero on bf16's grid in [1, 2)
  }
  const Comparison right = compare_output("y", DType::bf16, {500}, elementwise, nearest, exact, nearest, {});
  EXPECT_TRUE(right.pass) << right.error.first_mismatch;
  EXPECT_LT(std::fabs(right.error.rounding_bias), 0.2);
  const Comparison wrong = compare_output("y", DType::bf16, {500}, elementwise, truncated, exact, nearest, {});
  EXPECT_FALSE(wrong.pass);
  EXPECT_LT(wrong.error.rounding_bias, -0.5);
  EXPECT_THAT(wrong.error.first_mismatch, HasSubstr("rounds toward zero"));
  EXPECT_LE(wrong.error.worst_ratio, 1) << "each value alone is within its bound";
}

// A sum of n positive terms into an f32 output: accumulating in a 16-bit type (one bf16 or f16 ulp
// lost or gained per step, the usual vendor shortcut) fails; fp32 accumulation in any order passes,
// and the reference's own single rounding sits at half the bound at most.
TEST(Tolerance, OneUlpPerStepOfA16BitAccumulatorShows) {
  const int64_t n = 256;
  const ErrorModel sum{.magnitude = Magnitude::abs_inputs, .c = 2, .n = n};
  double exact = 0;
  float fp32 = 0, fp32_reversed = 0;
  uint16_t bf16_sum = f32_to_bf16(0.0f), f16_sum = f32_to_f16(0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float term = 1.0f + static_cast<float>(i % 7) * 0x1p-5f;
    const float reversed = 1.0f + static_cast<float>((n - 1 - i) % 7) * 0x1p-5f;
    exact += term;
    fp32 += term;
    fp32_reversed += reversed;
    bf16_sum = f32_to_bf16(bf16_to_f32(bf16_sum) + term);
    f16_sum = f32_to_f16(f16_to_f32(f16_sum) + term);
  }
  const auto judge = [&](double got) {
    return compare_output("y", DType::f32, {1}, sum, {got}, {exact}, {exact}, {exact});
  };
  EXPECT_FALSE(judge(bf16_to_f32(bf16_sum)).pass);
  EXPECT_FALSE(judge(f16_to_f32(f16_sum)).pass);
  EXPECT_TRUE(judge(fp32).pass);
  EXPECT_TRUE(judge(fp32_reversed).pass);
  const Comparison reference = judge(static_cast<float>(exact));
  EXPECT_TRUE(reference.pass);
  EXPECT_LE(reference.error.worst_ratio, 0.5);
}

TEST(Tolerance, ReductionLengthWidensTheBound) {
  const double exact = 1.0, got = 1.0 + 100 * 0x1p-24;
  const ErrorModel short_sum{.magnitude = Magnitude::exact, .c = 2, .n = 10};
  const ErrorModel long_sum{.magnitude = Magnitude::exact, .c = 2, .n = 1000};
  EXPECT_FALSE(compare_output("y", DType::f32, {1}, short_sum, {got}, {exact}, {exact}, {}).pass);
  EXPECT_TRUE(compare_output("y", DType::f32, {1}, long_sum, {got}, {exact}, {exact}, {}).pass);
}

TEST(Tolerance, AbsoluteInputsBoundCancellation) {
  // exact 0.001 from terms of size 100: the error allowed follows the terms, not the result.
  const ErrorModel model{.magnitude = Magnitude::abs_inputs, .c = 2, .n = 4};
  const double got = 0.001 + 3e-5;
  EXPECT_TRUE(compare_output("y", DType::f32, {1}, model, {got}, {0.001}, {0.001}, {100.0}).pass);
  EXPECT_FALSE(compare_output("y", DType::f32, {1}, model, {got}, {0.001}, {0.001}, {1.0}).pass);
}

TEST(Tolerance, NonFiniteValuesMustMatch) {
  const ErrorModel model{};
  const double nan = std::nan(""), inf = INFINITY;
  EXPECT_TRUE(compare_output("y", DType::f32, {2}, model, {nan, inf}, {nan, inf}, {nan, inf}, {}).pass);
  EXPECT_FALSE(compare_output("y", DType::f32, {1}, model, {1.0}, {nan}, {nan}, {}).pass);
  EXPECT_FALSE(compare_output("y", DType::f32, {1}, model, {nan}, {1.0}, {1.0}, {}).pass);
  EXPECT_FALSE(compare_output("y", DType::f32, {1}, model, {-inf}, {inf}, {inf}, {}).pass);
  // An overflow the reference also rounds to infinity is the right answer.
  EXPECT_TRUE(compare_output("y", DType::f16, {1}, model, {inf}, {70000.0}, {inf}, {}).pass);
}

TEST(Tolerance, BitExactOperatorsCompareWithTheSameDtypeReference) {
  const ErrorModel exact_model{.bit_exact = true};
  EXPECT_TRUE(compare_output("mask", DType::boolean, {3}, exact_model, {1, 0, 1}, {1, 0, 1}, {1, 0, 1}, {}).pass);
  const Comparison c =
      compare_output("y", DType::bf16, {2}, exact_model, {1.0, 2.0}, {1.0, 2.001}, {1.0, 2.0078125}, {});
  EXPECT_FALSE(c.pass);
  EXPECT_THAT(c.error.first_mismatch, HasSubstr("element 1"));
  EXPECT_EQ(c.error.mismatch_fraction, 0.5);
}

TEST(Tolerance, ReportsTheErrorItMeasured) {
  const ErrorModel model{.magnitude = Magnitude::exact, .c = 0, .n = 0};
  const Comparison c = compare_output("y", DType::f32, {2}, model, {1.5, 2.0}, {1.0, 2.0}, {1.0, 2.0}, {});
  EXPECT_FALSE(c.pass);
  EXPECT_DOUBLE_EQ(c.error.max_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(c.error.needed_atol, 0.5);
  EXPECT_DOUBLE_EQ(c.error.needed_rtol, 0.5);
  EXPECT_GT(c.error.worst_ratio, 1);
  EXPECT_GT(c.error.cosine_similarity, 0.9);
}

TEST(Tolerance, EveryOutputOfEveryCaseHasAModel) {
  for (Mode mode : {Mode::quick, Mode::full}) {
    const CaseList list = build_cases(mode, {DType::f32, DType::f16, DType::bf16});
    EXPECT_GT(list.cases.size(), 100u);
    for (const Case& c : list.cases)
      for (const TensorSpec& spec : c.tensors)
        if (spec.role != Role::input) {
          EXPECT_NO_THROW(error_model(c, spec.name)) << c.op << " " << c.name;
        }
  }
}

// The one list of operators (h2/plugin_ops.h) is the suite's too: an operator added to the ABI
// without cases or without a tolerance fails here, not silently in a vendor's certificate.
TEST(Coverage, EveryOperatorOfTheAbiHasCasesAndATolerance) {
  for (Mode mode : {Mode::quick, Mode::full}) {
    const CaseList list = build_cases(mode, {DType::f32, DType::f16, DType::bf16});
    for (H2_Op op : all_ops()) {
      const std::string name(op_name(op));
      int cases = 0;
      for (const Case& c : list.cases) {
        if (c.op != name) continue;
        ++cases;
        for (const TensorSpec& spec : c.tensors)
          if (spec.role != Role::input) {
            EXPECT_NO_THROW(error_model(c, spec.name)) << name << ": " << c.name;
          }
      }
      EXPECT_GT(cases, 0) << "operator " << name << " has no conformance case in --"
                          << (mode == Mode::quick ? "quick" : "full");
    }
  }
  EXPECT_EQ(operator_names().size(), all_ops().size() + 2);  // and the streams and errors checks
}

// ---- Waivers ----

TEST(Waivers, AWaiverTurnsAFailureIntoWaivedUntilItExpires) {
  std::vector<Waiver> waivers = {{"cuda", "attention*", "bf16", "*", "known fp32 softmax issue, bug 12", "2027-01-31"}};
  std::vector<CaseResult> cases = {{.op = "attention", .name = "causal", .dtype = "bf16", .state = CaseState::fail},
                                   {.op = "attention", .name = "causal", .dtype = "f32", .state = CaseState::fail},
                                   {.op = "attention", .name = "ok", .dtype = "bf16", .state = CaseState::pass}};
  std::vector<CaseResult> before = cases;
  apply_waivers(cases, "cuda", waivers, "2026-11-22");
  EXPECT_EQ(cases[0].state, CaseState::waived);
  EXPECT_THAT(cases[0].message, HasSubstr("known fp32 softmax issue"));
  EXPECT_EQ(cases[1].state, CaseState::fail) << "another dtype";
  EXPECT_EQ(cases[2].state, CaseState::pass) << "a pass is never touched";
  apply_waivers(before, "cuda", waivers, "2027-02-01");
  EXPECT_EQ(before[0].state, CaseState::fail) << "expired";
  EXPECT_THAT(before[0].message, HasSubstr("expired on 2027-01-31"));
  apply_waivers(before, "mlu", waivers, "2026-11-22");
  EXPECT_EQ(before[0].state, CaseState::fail) << "another plugin";
}

TEST(Waivers, MalformedFilesAreRejectedNamingTheEntry) {
  const fs::path dir = temp_dir("waivers");
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "w.json") << text;
    return dir / "w.json";
  };
  EXPECT_THAT([&] { load_waivers(write("{ not json")); },
              testing::ThrowsMessage<Error>(HasSubstr("is not valid JSON")));
  EXPECT_THAT(
      [&] {
        load_waivers(write(R"({"waivers": [{"plugin": "x", "op": "y", "dtype": "*", "case": "*", "reason": ""}]})"));
      },
      testing::ThrowsMessage<Error>(HasSubstr("entry 0: \"reason\" must be a non-empty string")));
  EXPECT_THAT(
      [&] {
        load_waivers(write(
            R"({"waivers": [{"plugin": "x", "op": "y", "dtype": "*", "case": "*", "reason": "r", "expires": "soon"}]})"));
      },
      testing::ThrowsMessage<Error>(HasSubstr("\"expires\" must be a date YYYY-MM-DD, not soon")));
  EXPECT_EQ(load_waivers(default_waiver_file()).size(), 0u) << "the repository's waiver file is valid and empty";
}

// ---- Running the suite ----

std::string fake_plugin(const std::string& name) {
  return (fs::path(std::getenv("H2_TEST_FAKE_PLUGIN_DIR")) / ("libh2-plugin-" + name + ".so")).string();
}

TEST(Suite, OperatorsAndDtypesOutsideTheCapabilityAreNotSupported) {
  SuiteOptions options;
  options.plugin = fake_plugin("ops-partial");  // fill only, f32 only, contiguous only
  options.ops = {"fill", "softmax"};
  SuiteReport report = run_suite(options);
  size_t softmax_ns = 0, fill_bf16_ns = 0, fill_f32_pass = 0;
  for (const CaseResult& r : report.cases) {
    if (r.op == "softmax") {
      EXPECT_EQ(r.state, CaseState::not_supported);
      EXPECT_THAT(r.message, HasSubstr("does not provide softmax"));
      ++softmax_ns;
    }
    if (r.op == "fill" && r.dtype == "bf16") fill_bf16_ns += r.state == CaseState::not_supported;
    if (r.op == "fill" && r.dtype == "f32") {
      // Every case but the unaligned one writes a strided view, which the plugin's capability excludes.
      if (r.name.find("unaligned") != std::string::npos) {
        EXPECT_EQ(r.state, CaseState::pass) << r.message;
        ++fill_f32_pass;
      } else {
        EXPECT_EQ(r.state, CaseState::not_supported) << r.name << ": " << r.message;
        EXPECT_THAT(r.message, HasSubstr("needs contiguous tensors"));
      }
    }
  }
  EXPECT_GT(softmax_ns, 0u);
  EXPECT_EQ(fill_f32_pass, 1u);
  EXPECT_EQ(fill_bf16_ns, 4u);
  EXPECT_TRUE(report.passed()) << "what is outside the capability is not supported, not failed";
}

TEST(Suite, APluginThatCannotLoadIsAnErrorSayingWhy) {
  SuiteOptions options;
  options.plugin = fake_plugin("abi-major");
  EXPECT_THAT([&] { run_suite(options); }, testing::ThrowsMessage<Error>(HasSubstr("ABI mismatch (plugin 2.3")));
}

TEST(Suite, CertificatesBelongToTheirPluginFileAndAreComplete) {
  SuiteOptions options;
  options.plugin = "cpu-reference";
  options.ops = {"fill", "arange"};
  SuiteReport report = run_suite(options);
  ASSERT_TRUE(report.passed());
  const fs::path dir = temp_dir("certificate");
  write_reports(report, dir);
  for (const char* file : {"report.json", "junit.xml", "certificate.json"}) EXPECT_TRUE(fs::exists(dir / file)) << file;

  const fs::path cert = dir / "certificate.json";
  EXPECT_EQ(verify_certificate(cert, report.plugin.path), "");
  EXPECT_THAT(verify_certificate(cert, fake_plugin("fake")), HasSubstr("the certificate is for another file"));
  EXPECT_THAT(verify_certificate(dir / "missing.json", report.plugin.path), HasSubstr("cannot read certificate"));

  nlohmann::json json = nlohmann::json::parse(std::ifstream(cert));
  json.erase("totals");
  std::ofstream(dir / "incomplete.json") << json.dump();
  EXPECT_THAT(verify_certificate(dir / "incomplete.json", report.plugin.path), HasSubstr("it has no \"totals\""));
  json = nlohmann::json::parse(std::ifstream(cert));
  json["passed"] = false;
  std::ofstream(dir / "failed.json") << json.dump();
  EXPECT_THAT(verify_certificate(dir / "failed.json", report.plugin.path), HasSubstr("did not conform"));
  json = nlohmann::json::parse(std::ifstream(cert));
  json["suite_version"] = "0.1";
  std::ofstream(dir / "old.json") << json.dump();
  EXPECT_THAT(verify_certificate(dir / "old.json", report.plugin.path), HasSubstr("issued by suite 0.1"));

  nlohmann::json full = nlohmann::json::parse(std::ifstream(dir / "report.json"));
  EXPECT_EQ(full["totals"]["pass"], report.count(CaseState::pass));
  EXPECT_EQ(full["plugin"]["sha256"], sha256_file(report.plugin.path));
}

TEST(Suite, Sha256OfAKnownInput) {
  const fs::path dir = temp_dir("sha");
  std::ofstream(dir / "abc", std::ios::binary) << "abc";
  EXPECT_EQ(sha256_file(dir / "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace h2::conformance
