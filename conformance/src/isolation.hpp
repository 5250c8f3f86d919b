// Runs work in a forked child process with a time limit, so a plugin that crashes or hangs is
// reported and the suite goes on. The child reports through a pipe, one line per message, so what it
// said before dying is kept.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace h2::conformance {

struct ChildOutcome {
  std::vector<std::string> lines;  // what the child wrote, line by line
  bool exited = false;             // ended by itself
  int exit_code = 0;
  bool timed_out = false;  // killed at the deadline
  std::string signal;      // "SIGSEGV" when a signal ended it
};

// Forks; the child runs `body(write_line)` and exits. The parent kills it after `timeout_seconds`.
// The calling process must not have plugins loaded (their threads do not survive fork).
ChildOutcome run_in_child(const std::function<void(const std::function<void(const std::string&)>&)>& body,
                          double timeout_seconds);

}  // namespace h2::conformance
