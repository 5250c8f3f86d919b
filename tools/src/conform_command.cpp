#include "conform_command.hpp"

#include <unistd.h>

#include <fnmatch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "h2/conformance.hpp"
#include "h2/error.hpp"

namespace h2::tools {

namespace {

// One line per finished operator; redrawn in place with a bar on a terminal.
void show_progress(size_t done, size_t total, const std::string& op, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  std::fprintf(stderr, "%s[%.*s%*s] %2zu/%zu operators  %-24s %6.1f s%s", terminal ? "\r" : "", filled,
               "==============================", width - filled, "", done, total, op.c_str(), seconds,
               terminal && done < total ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace

void add_conform_command(CLI::App& app, ConformOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand("conform", "Certify a plugin's operators against the cpu-reference plugin");
  command->add_option("--plugin", options.plugin, "The plugin to test: a NAME in the search path or a PATH")
      ->required();
  command->add_option("--device", options.device, "Device index within the plugin")->check(CLI::NonNegativeNumber);
  command->add_option("--ops", options.ops, "Only operators matching these glob patterns (comma-separated)")
      ->delimiter(',');
  command->add_option("--dtypes", options.dtypes, "Only these dtypes (comma-separated: f32,f16,bf16)")->delimiter(',');
  auto* quick = command->add_flag("--quick", options.quick, "Small shapes (the default): about a minute on two cores");
  auto* full = command->add_flag("--full", options.full, "LLaMA-7B widths: minutes to hours, depending on the device");
  quick->excludes(full);
  command->add_option("--report-dir", options.report_dir, "Write report.json, junit.xml and certificate.json here");
  command->add_option("--timeout", options.timeout_seconds, "Seconds each operator may take before it counts as hung")
      ->check(CLI::PositiveNumber);
  command->add_option("--verify", options.verify,
                      "Check this certificate against the --plugin file instead of testing");
  command->callback([&options, &exit_code] { exit_code = run_conform(options); });
}

int run_conform(const ConformOptions& options) {
  if (!options.verify.empty()) {
    const std::string problem = conformance::verify_certificate(options.verify, options.plugin);
    if (!problem.empty()) {
      std::cerr << "h2 conform --verify: " << problem << "\n";
      return 1;
    }
    std::cout << options.verify << " certifies " << options.plugin << "\n";
    return 0;
  }

  conformance::SuiteOptions suite;
  suite.plugin = options.plugin;
  suite.device = options.device;
  suite.ops = options.ops;
  for (const std::string& name : options.dtypes) {
    auto dtype = dtype_from_name(name);
    if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16)) {
      std::cerr << "h2 conform: --dtypes: '" << name << "' is not one of f32, f16, bf16\n";
      return 2;
    }
    suite.dtypes.push_back(*dtype);
  }
  for (const std::string& pattern : options.ops) {
    bool any = false;
    for (const std::string& op : conformance::operator_names()) any |= fnmatch(pattern.c_str(), op.c_str(), 0) == 0;
    if (!any) {
      std::cerr << "h2 conform: --ops: '" << pattern << "' matches no operator (h2 conform knows:";
      for (const std::string& op : conformance::operator_names()) std::cerr << " " << op;
      std::cerr << ")\n";
      return 2;
    }
  }
  suite.mode = options.full ? conformance::Mode::full : conformance::Mode::quick;
  suite.op_timeout_seconds = options.timeout_seconds > 0 ? options.timeout_seconds : (options.full ? 3600 : 120);
  const auto start = std::chrono::steady_clock::now();
  suite.progress = [start](size_t done, size_t total, const std::string& op) { show_progress(done, total, op, start); };

  conformance::SuiteReport report;
  try {
    report = conformance::run_suite(suite);
  } catch (const Error& e) {
    std::cerr << "h2 conform: " << e.what() << "\n";
    return 1;
  }
  std::cout << "\n";
  conformance::print_summary(report, std::cout);
  if (!options.report_dir.empty()) {
    try {
      conformance::write_reports(report, options.report_dir);
    } catch (const Error& e) {
      std::cerr << "h2 conform: " << e.what() << "\n";
      return 1;
    }
    std::cout << "Reports: " << options.report_dir << "/{report.json, junit.xml, certificate.json}\n";
  }
  return report.passed() ? 0 : 1;
}

}  // namespace h2::tools
