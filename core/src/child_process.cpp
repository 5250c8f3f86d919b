#include "h2/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace h2 {

namespace {

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

}  // namespace

ChildOutcome run_in_child(const std::function<void(const std::function<void(const std::string&)>&)>& body,
                          double timeout_seconds, const std::function<std::string(const std::string&)>& error_line) {
  int fds[2];
  // Close-on-exec: a process the child starts must not hold the pipe open after the child has ended.
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // else a child that calls exit() writes the parent's buffered output again
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    int code = 0;
    try {
      body([&](const std::string& line) { write_all(fds[1], line + "\n"); });
    } catch (const std::exception& e) {
      write_all(fds[1], (error_line ? error_line(e.what()) : std::string(e.what())) + "\n");
      code = 2;
    }
    close(fds[1]);
    _exit(code);  // skip static destructors: the parent's state is not ours to tear down
  }

  close(fds[1]);
  ChildOutcome outcome;
  std::string pending;
  auto take = [&](const char* data, size_t n) {
    pending.append(data, n);
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      outcome.lines.push_back(pending.substr(0, end));
      pending.erase(0, end + 1);
    }
  };
  int status = 0;
  bool reaped = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      outcome.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (ready < 0 && errno != EINTR) break;
    char buffer[65536];
    if (ready > 0) {
      const ssize_t n = read(fds[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // end of the pipe: the child has finished or died
      take(buffer, static_cast<size_t>(n));
    }
    // The child may have ended while a process it forked still holds the pipe: what it wrote is
    // in the pipe already.
    if (waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      fcntl(fds[0], F_SETFL, O_NONBLOCK);
      for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) take(buffer, static_cast<size_t>(n));
      break;
    }
  }
  close(fds[0]);
  while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!outcome.timed_out) {
    if (WIFEXITED(status)) {
      outcome.exited = true;
      outcome.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      const char* name = sigabbrev_np(WTERMSIG(status));
      outcome.signal = name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(WTERMSIG(status));
    }
  }
  return outcome;
}

bool process_is_single_threaded() {
  std::error_code error;
  std::filesystem::directory_iterator tasks("/proc/self/task", error);
  if (error) return false;
  return std::distance(tasks, std::filesystem::directory_iterator()) == 1;
}

}  // namespace h2
