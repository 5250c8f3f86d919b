// Supervising the local ranks of `h2 launch`: starts each rank in its own process group, relays its
// stdout and stderr line by line (prefixed), forwards SIGINT/SIGTERM/SIGHUP, and stops every rank
// when one fails, with bounded waits (grace, then SIGTERM, then SIGKILL).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace h2::tools {

struct RankProcess {
  std::vector<std::string> argv;                                 // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> environment;  // set on top of the launcher's own
  std::vector<int> cpus;  // the CPUs it may run on (sched_setaffinity before exec); empty: the launcher's
};

struct SupervisorOptions {
  std::string name = "h2 launch";  // prefix of the supervisor's own messages
  bool prefix_output = true;       // "[rank R] " in front of every line of a rank's output
  double grace_seconds = 5;        // after a failure or a forwarded signal, before SIGTERM
  double kill_after_seconds = 3;   // after SIGTERM, before SIGKILL
  double give_up_seconds = 5;      // after SIGKILL, before leaving a rank that does not die
};

// Runs the ranks to completion; returns the launcher's exit code: 0 when every rank exited 0, the first
// failing rank's code (128 + signal when it was killed), 128 + signal when the launcher got one, 127
// when the command cannot be run. Throws std::runtime_error when the ranks cannot be started at all.
int run_rank_processes(const std::vector<RankProcess>& ranks, const SupervisorOptions& options);

}  // namespace h2::tools
