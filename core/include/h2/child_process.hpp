// Runs work in a forked child process with a time limit, so that code which may crash, exit or hang
// (a plugin's initialization, a conformance case) is reported instead of taking the caller down. The
// child reports through a pipe, one line per message, so what it said before dying is kept. Used by
// plugin discovery (core) and the conformance suite.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace h2 {

struct ChildOutcome {
  std::vector<std::string> lines;  // what the child wrote, line by line
  bool exited = false;             // ended by itself
  int exit_code = 0;
  bool timed_out = false;  // killed at the deadline
  std::string signal;      // "SIGSEGV" when a signal ended it
};

// Forks; the child runs `body(write_line)` and exits with 0, or, when `body` throws, writes
// `error_line(what())` (the message itself by default) and exits with 2. The parent kills the child
// after `timeout_seconds` and blocks until it has ended. The child ends with _exit: no static
// destructors and no atexit handlers of the parent's state run there.
// Call it only while the process has one thread: a lock another thread held at the fork (the dynamic
// loader's, an allocator's) would stay locked in the child forever.
ChildOutcome run_in_child(const std::function<void(const std::function<void(const std::string&)>&)>& body,
                          double timeout_seconds,
                          const std::function<std::string(const std::string&)>& error_line = {});

// Whether the calling process has exactly one thread (Linux: /proc/self/task), so that
// run_in_child is safe.
bool process_is_single_threaded();

}  // namespace h2
