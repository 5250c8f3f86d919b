// The `h2` command line: one binary, one subcommand per task.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "bench_comm_command.hpp"
#include "conform_command.hpp"
#include "devices_command.hpp"
#include "h2/error.hpp"
#include "h2/version.hpp"
#include "launch_command.hpp"
#include "plan_command.hpp"
#include "profile_command.hpp"
#include "train_command.hpp"

int main(int argc, char** argv) {
  // libfabric pulls in PSM's libinfinipath, whose load-time constructor catches SIGSEGV, SIGBUS,
  // SIGILL, SIGFPE and SIGABRT to print a backtrace and exit with code 1 (a crashed plugin then looked
  // like "exit code 1", and a rank's crash like an ordinary failure). A crash stays a crash here: the
  // launcher and the plugin probe name the signal.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);
  CLI::App app{"H2: train large language models on heterogeneous clusters"};
  app.require_subcommand(0, 1);  // checked below, so an unknown word is reported by name
  app.set_version_flag("--version", std::string("h2 ") + H2_VERSION);

  int exit_code = 0;
  h2::tools::DevicesOptions devices;
  h2::tools::add_devices_command(app, devices, exit_code);
  h2::tools::ConformOptions conform;
  h2::tools::add_conform_command(app, conform, exit_code);
  h2::tools::PlanOptions plan;
  h2::tools::add_plan_command(app, plan, exit_code);
  h2::tools::LaunchOptions launch;
  h2::tools::add_launch_command(app, launch, exit_code);
  h2::tools::BenchCommOptions bench_comm;
  h2::tools::add_bench_command(app, bench_comm, exit_code);
  h2::tools::ProfileOptions profile;
  h2::tools::add_profile_command(app, profile, exit_code);
  h2::tools::TrainCommandOptions train;
  h2::tools::add_train_command(app, train, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help, or the version: exit 0); every usage error exits 2,
    // as the commands' own do, rather than CLI11's code per kind (105 for a value out of range).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "h2: " << e.what() << "\n";
    return 1;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "h2: a command is required\n\n" << app.help();
    return 2;
  }
  return exit_code;
}
