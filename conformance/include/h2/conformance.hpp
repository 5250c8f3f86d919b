// The conformance suite: judges a plugin's operators against the cpu-reference plugin and issues a
// certificate. Used by `h2 conform` and, as a library, by tests.
//
// Every operator runs in a child process with a time limit, so a plugin that crashes or hangs is
// reported and the suite goes on. Call run_suite() from a process that has not loaded plugins yet:
// children are forked, and a process whose plugins started threads cannot fork safely.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "h2/device.hpp"
#include "h2/dtype.hpp"

namespace h2::conformance {

// Bumped whenever cases or tolerances change; certificates name it.
// 1.2: one-ulp bound with a rounding-bias check, views swept for every operator, integer casts.
// 1.3: AdamW's first moment and parameters bounded by their terms; the tanh GELU reference without
// cancellation.
inline constexpr const char* kSuiteVersion = "1.3";

enum class Mode { quick, full };

struct SuiteOptions {
  std::string plugin;            // NAME (looked up in the plugin search path) or PATH
  int device = 0;                // device index within the plugin
  std::vector<std::string> ops;  // glob patterns over operator names; empty: all
  std::vector<DType> dtypes;     // empty: f32, f16 and bf16
  Mode mode = Mode::quick;
  double op_timeout_seconds = 120;    // per operator (its whole child process)
  std::filesystem::path waiver_file;  // empty: the suite's own waivers.json
  bool isolate = true;                // false: run in this process (for debugging; no crash protection)
  // Called as each operator finishes: (done, total, operator name).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

enum class CaseState { pass, fail, not_supported, waived, crashed, timed_out };
const char* state_name(CaseState state);

// How far one output tensor is from the exact (fp64) result.
struct OutputError {
  std::string name;
  double max_abs_error = 0;
  double max_rel_error = 0;
  double mismatch_fraction = 0;  // elements beyond their bound
  double cosine_similarity = 1;
  double worst_ratio = 0;  // max over elements of error / bound (passes when <= 1)
  double needed_atol = 0;  // the tolerance that would have passed, DIOPI style
  double needed_rtol = 0;
  double reference_max_abs_error = 0;  // the reference's own error in the same dtype
  // Mean error away from zero, in units of the final rounding's half ulp, over the distinct exact
  // values whose bound the final rounding dominates (0 where too few): round to nearest gives about
  // 0, truncation about -1. Fails beyond +-0.5 (see tolerance.hpp).
  double rounding_bias = 0;
  std::string first_mismatch;  // "element 12: 0.5 vs exact 0.25 (bound 1e-3)"
};

struct CaseResult {
  std::string op;
  std::string name;   // "[64, 4096] rows"
  std::string dtype;  // "bf16", or "-" for behaviour checks
  CaseState state = CaseState::pass;
  std::string message;  // why it failed, crashed, was waived...
  std::vector<OutputError> outputs;
  double seconds = 0;
};

struct PluginDescription {
  std::string name, version, path, sha256;
  uint32_t abi_major = 0, abi_minor = 0;
  int device = 0;
  DeviceProperties properties;
};

struct SuiteReport {
  std::string suite_version = kSuiteVersion;
  Mode mode = Mode::quick;
  std::string date;  // ISO 8601, UTC
  PluginDescription plugin;
  std::vector<CaseResult> cases;
  size_t count(CaseState state) const;
  bool passed() const;  // no fail, crash or timeout, and at least one pass
};

// Runs the suite. Throws h2::Error when the plugin cannot be loaded at all (the message says why).
SuiteReport run_suite(const SuiteOptions& options);

// The operator names the suite knows, in its order.
std::vector<std::string> operator_names();

// Writes report.json, junit.xml and certificate.json into `dir` (created if needed).
void write_reports(const SuiteReport& report, const std::filesystem::path& dir);
// A table per operator for people.
void print_summary(const SuiteReport& report, std::ostream& out);

// Checks that `certificate` was issued for the plugin file at `plugin_path` (same SHA-256) by this
// suite version and is complete. Returns an empty string when it holds, else why not.
std::string verify_certificate(const std::filesystem::path& certificate, const std::filesystem::path& plugin_path);

std::string sha256_file(const std::filesystem::path& path);

}  // namespace h2::conformance
