#include "rank_processes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "h2/log.hpp"

namespace h2::tools {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxLine = 64 * 1024;  // a longer line without a newline is relayed in pieces
constexpr int kDrainReads = 64;         // bounds the reads of one pipe once its rank has exited
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the launcher's own output is gone; nothing better to do with the text
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void say(const std::string& name, const std::string& message) {
  write_all(STDERR_FILENO, name + ": " + message + "\n");
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Fds 0, 1 and 2 must be open, or a pipe created below could take one of their numbers.
void ensure_standard_fds_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
}

struct Stream {
  size_t rank = 0;
  int fd = -1;      // read end of the rank's pipe; -1 once closed
  int target = -1;  // the launcher's fd its lines go to
  std::string pending;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  Stream out;
  Stream err;
};

class Supervisor {
 public:
  Supervisor(const std::vector<RankProcess>& specs, const SupervisorOptions& options)
      : specs_(specs), options_(options), ranks_(specs.size()) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].out = {r, -1, STDOUT_FILENO, {}};
      ranks_[r].err = {r, -1, STDERR_FILENO, {}};
      prefixes_.push_back(options.prefix_output ? "[rank " + std::to_string(r) + "] " : "");
    }
  }

  ~Supervisor() {
    for (Rank& rank : ranks_) {
      close_stream(rank.out);
      close_stream(rank.err);
    }
    if (null_fd_ >= 0) ::close(null_fd_);
    if (signal_fd_ >= 0) ::close(signal_fd_);
    if (signals_installed_) {
      sigaction(SIGCHLD, &old_sigchld_, nullptr);
      sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    }
  }

  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  int run() {
    ensure_standard_fds_open();
    raise_fd_limit();
    install_signals();
    null_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd_ < 0) throw std::runtime_error(std::string("cannot open /dev/null: ") + std::strerror(errno));
    for (size_t r = 0; r < ranks_.size() && !exit_code_; ++r) start(r);
    supervise();
    return exit_code_.value_or(0);
  }

 private:
  void raise_fd_limit() {
    // Two pipes per rank stay open for the whole job; 1024 (a common soft limit) is 511 ranks.
    if (getrlimit(RLIMIT_NOFILE, &old_nofile_) != 0) return;
    const rlim_t needed = 2 * static_cast<rlim_t>(ranks_.size()) + 64;
    if (old_nofile_.rlim_cur != RLIM_INFINITY && old_nofile_.rlim_cur < needed) {
      rlimit raised = old_nofile_;
      raised.rlim_cur = old_nofile_.rlim_max == RLIM_INFINITY ? needed : std::min(needed, old_nofile_.rlim_max);
      if (raised.rlim_cur < needed || setrlimit(RLIMIT_NOFILE, &raised) != 0)
        throw std::runtime_error(std::to_string(ranks_.size()) + " ranks need " + std::to_string(needed) +
                                 " open files, but the limit is " + std::to_string(old_nofile_.rlim_max) +
                                 " (ulimit -n)");
      nofile_raised_ = true;
    }
  }

  // SIGINT, SIGTERM, SIGHUP and SIGCHLD arrive through a signalfd polled with the ranks' pipes. A signal
  // the launcher was started ignoring (nohup, a background job) stays ignored, by it and by the ranks.
  void install_signals() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    for (int sig : kForwardedSignals) {
      struct sigaction current {};
      if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&mask, sig);
    }
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGCHLD, &default_action, &old_sigchld_);  // SIG_IGN would reap the ranks behind our back
    sigprocmask(SIG_BLOCK, &mask, &old_mask_);
    signals_installed_ = true;
    signal_fd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  }

  void start(size_t r) {
    const RankProcess& spec = specs_[r];
    if (spec.argv.empty()) throw std::runtime_error("rank " + std::to_string(r) + " has no command");

    // Everything the child needs is built before fork: after it, only system calls.
    std::vector<std::string> env_strings;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string_view text(*entry);
      const std::string_view name = text.substr(0, text.find('='));
      const bool replaced = std::any_of(spec.environment.begin(), spec.environment.end(),
                                        [&](const auto& assignment) { return assignment.first == name; });
      if (!replaced) env_strings.emplace_back(text);
    }
    for (const auto& [name, value] : spec.environment) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings = spec.argv;
    std::vector<char*> argv;
    for (std::string& arg : arg_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);

    // Rank 0 reads the launcher's stdin unless that is a terminal: a rank is in its own process group,
    // and reading the terminal from a background group would stop it.
    const int stdin_fd = (r == 0 && !isatty(STDIN_FILENO)) ? STDIN_FILENO : null_fd_;
    int out_pipe[2], err_pipe[2], exec_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return start_failed(r, "pipe", errno);
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      const int error = errno;
      close_pair(out_pipe);
      return start_failed(r, "pipe", error);
    }
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
      const int error = errno;
      close_pair(out_pipe);
      close_pair(err_pipe);
      return start_failed(r, "pipe", error);
    }

    // Built before fork: the child only calls async-signal-safe functions.
    const std::vector<int>& cpus = spec.cpus;
    cpu_set_t cpus_set;
    CPU_ZERO(&cpus_set);
    for (int cpu : cpus) CPU_SET(cpu, &cpus_set);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the launcher died before prctl
      if (stdin_fd != STDIN_FILENO) dup2(stdin_fd, STDIN_FILENO);
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
      if (nofile_raised_) setrlimit(RLIMIT_NOFILE, &old_nofile_);
      if (!cpus.empty() && sched_setaffinity(0, sizeof cpus_set, &cpus_set) != 0) {
        // Reaches the rank's stderr, so the job's output says why this rank runs unbound.
        static constexpr char kWhy[] = "h2 launch: cannot bind this rank to its CPUs; it runs unbound\n";
        [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, kWhy, sizeof kWhy - 1);
      }
      sigaction(SIGCHLD, &old_sigchld_, nullptr);
      sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      execvpe(argv[0], argv.data(), envp.data());
      const int error = errno;
      [[maybe_unused]] const ssize_t written = ::write(exec_pipe[1], &error, sizeof error);
      _exit(127);
    }
    const int fork_error = errno;
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::close(exec_pipe[1]);
    if (pid < 0) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      ::close(exec_pipe[0]);
      return start_failed(r, "fork", fork_error);
    }
    setpgid(pid, pid);  // also done by the child; whichever runs first wins, so signals never miss it

    // The child's end of exec_pipe closes at a successful exec (CLOEXEC) or carries errno on failure.
    int exec_error = 0;
    ssize_t n;
    do {
      n = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
    } while (n < 0 && errno == EINTR);
    ::close(exec_pipe[0]);

    Rank& rank = ranks_[r];
    rank.pid = pid;
    rank.out.fd = out_pipe[0];
    rank.err.fd = err_pipe[0];
    fcntl(rank.out.fd, F_SETFL, fcntl(rank.out.fd, F_GETFL) | O_NONBLOCK);
    fcntl(rank.err.fd, F_SETFL, fcntl(rank.err.fd, F_GETFL) | O_NONBLOCK);
    if (n == static_cast<ssize_t>(sizeof exec_error)) {
      int status;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      close_stream(rank.out);
      close_stream(rank.err);
      say(options_.name, "cannot run '" + spec.argv[0] + "': " + std::strerror(exec_error));
      fail_to_start(127, "the command could not be run");
      return;
    }
    rank.running = true;
    log(LogLevel::debug, "launch", "rank " + std::to_string(r) + ": pid " + std::to_string(pid));
  }

  static void close_pair(int fds[2]) {
    ::close(fds[0]);
    ::close(fds[1]);
  }

  void start_failed(size_t r, const char* call, int error) {
    say(options_.name, "cannot start rank " + std::to_string(r) + ": " + call + ": " + std::strerror(error));
    fail_to_start(1, "rank " + std::to_string(r) + " could not be started");
  }

  // The job cannot run as asked: the ranks already started get SIGTERM now, SIGKILL later.
  void fail_to_start(int code, const std::string& reason) {
    if (!exit_code_) exit_code_ = code;
    stop_note_ = reason;
    term_at_ = Clock::now();
  }

  void supervise() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;  // parallel to fds[1..]
    while (any_running()) {
      fds.clear();
      streams.clear();
      fds.push_back({signal_fd_, POLLIN, 0});
      for (Rank& rank : ranks_)
        for (Stream* stream : {&rank.out, &rank.err})
          if (stream->fd >= 0) {
            fds.push_back({stream->fd, POLLIN, 0});
            streams.push_back(stream);
          }
      const int ready = poll(fds.data(), fds.size(), poll_timeout_ms());
      if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      if (ready > 0) {
        for (size_t i = 1; i < fds.size(); ++i)
          if (fds[i].revents != 0) read_once(*streams[i - 1]);
        if (fds[0].revents != 0) handle_signals();
      }
      run_timers();
    }
    // Every rank has exited; what is left in the pipes (from processes the ranks left behind) is read
    // without waiting for it to end.
    for (Rank& rank : ranks_) finish_output(rank);
  }

  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.running; });
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> next;
    for (const auto& deadline :
         {term_sent_ ? std::nullopt : term_at_, kill_sent_ ? std::nullopt : kill_at_, give_up_at_})
      if (deadline && (!next || *deadline < *next)) next = deadline;
    if (!next) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
    return static_cast<int>(std::clamp<decltype(left)>(left, 0, 60'000));
  }

  // Reads what one pipe has now; returns false at its end (or an error), when it is closed.
  bool read_once(Stream& stream) {
    char buffer[kReadChunk];
    for (;;) {
      const ssize_t n = ::read(stream.fd, buffer, sizeof buffer);
      if (n > 0) {
        relay(stream, std::string_view(buffer, static_cast<size_t>(n)));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      flush_partial(stream);
      close_stream(stream);
      return false;
    }
  }

  void drain(Stream& stream) {
    for (int i = 0; i < kDrainReads && stream.fd >= 0; ++i) {
      pollfd p{stream.fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0 || !read_once(stream)) break;
    }
  }

  // Writes every complete line, prefixed, in one write: lines of different ranks never mix.
  void relay(Stream& stream, std::string_view data) {
    const std::string& prefix = prefixes_[stream.rank];
    stream.pending.append(data);
    std::string out;
    size_t begin = 0;
    for (size_t newline; (newline = stream.pending.find('\n', begin)) != std::string::npos; begin = newline + 1)
      out.append(prefix).append(stream.pending, begin, newline + 1 - begin);
    stream.pending.erase(0, begin);
    while (stream.pending.size() >= kMaxLine) {
      out.append(prefix).append(stream.pending, 0, kMaxLine).push_back('\n');
      stream.pending.erase(0, kMaxLine);
    }
    if (!out.empty()) write_all(stream.target, out);
  }

  void finish_output(Rank& rank) {
    drain(rank.out);
    drain(rank.err);
    flush_partial(rank.out);
    flush_partial(rank.err);
  }

  void flush_partial(Stream& stream) {
    if (stream.pending.empty()) return;
    write_all(stream.target, prefixes_[stream.rank] + stream.pending + "\n");
    stream.pending.clear();
  }

  static void close_stream(Stream& stream) {
    if (stream.fd >= 0) ::close(stream.fd);
    stream.fd = -1;
  }

  void handle_signals() {
    signalfd_siginfo info;
    bool child_exited = false;
    while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        child_exited = true;
      } else {
        forward(sig);
      }
    }
    if (child_exited) reap();
  }

  void forward(int sig) {
    if (!exit_code_) exit_code_ = 128 + sig;
    const std::string running = running_ranks();
    if (running.empty()) return;
    say(options_.name, "got " + signal_name(sig) + "; forwarding it to " + running);
    signal_running(sig);
    stop_after_grace(signal_name(sig));
  }

  void reap() {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = ranks_[r];
      if (!rank.running) continue;
      int status;
      const pid_t pid = waitpid(rank.pid, &status, WNOHANG);
      if (pid != rank.pid) continue;
      rank.running = false;
      // Its output first, then what became of it.
      finish_output(rank);
      const bool exited = WIFEXITED(status);
      const int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code == 0) {
        log(LogLevel::debug, "launch", "rank " + std::to_string(r) + " exited with code 0");
        continue;
      }
      // Once the launcher has signalled the ranks, their deaths are its own doing and not reported.
      if (!signalled_) {
        std::string what = "rank " + std::to_string(r) + " (pid " + std::to_string(rank.pid) + ") ";
        if (exited) {
          what += "exited with code " + std::to_string(code);
        } else {
          what += "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
          if (WCOREDUMP(status)) what += ", core dumped";
        }
        say(options_.name, what);
      }
      if (!exit_code_) exit_code_ = code;
      stop_after_grace("rank " + std::to_string(r) + " failed");
    }
  }

  // The first failure or signal starts the clock: grace, then SIGTERM, then SIGKILL.
  void stop_after_grace(const std::string& cause) {
    if (term_at_) return;
    term_at_ = after(options_.grace_seconds);
    stop_note_ = "still running " + seconds_text(options_.grace_seconds) + " after " + cause;
  }

  void run_timers() {
    const auto now = Clock::now();
    if (term_at_ && !term_sent_ && now >= *term_at_) {
      term_sent_ = true;
      kill_at_ = after(options_.kill_after_seconds);
      const std::string running = running_ranks();
      if (!running.empty()) {
        say(options_.name, "sending SIGTERM to " + running + " (" + stop_note_ + ")");
        signal_running(SIGTERM);
      }
    }
    if (kill_at_ && !kill_sent_ && now >= *kill_at_) {
      kill_sent_ = true;
      give_up_at_ = after(options_.give_up_seconds);
      const std::string running = running_ranks();
      if (!running.empty()) {
        say(options_.name, "sending SIGKILL to " + running + " (still running " +
                               seconds_text(options_.kill_after_seconds) + " after SIGTERM)");
        signal_running(SIGKILL);
      }
    }
    if (give_up_at_ && now >= *give_up_at_) {
      for (size_t r = 0; r < ranks_.size(); ++r) {
        if (!ranks_[r].running) continue;
        say(options_.name, "rank " + std::to_string(r) + " (pid " + std::to_string(ranks_[r].pid) +
                               ") has not exited " + seconds_text(options_.give_up_seconds) +
                               " after SIGKILL (stuck in the kernel?); leaving it");
        ranks_[r].running = false;
      }
      if (!exit_code_) exit_code_ = 1;
    }
  }

  void signal_running(int sig) {
    signalled_ = true;
    for (const Rank& rank : ranks_)
      if (rank.running) ::kill(-rank.pid, sig);  // the rank's whole process group
  }

  // "rank 3", "ranks 0, 2", "ranks 0-7, 9"
  std::string running_ranks() const {
    std::string list;
    size_t count = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!ranks_[r].running) continue;
      size_t last = r;
      while (last + 1 < ranks_.size() && ranks_[last + 1].running) ++last;
      count += last - r + 1;
      list += (list.empty() ? "" : ", ") + std::to_string(r) + (last > r ? "-" + std::to_string(last) : "");
      r = last;
    }
    if (count == 0) return "";
    return (count == 1 ? "rank " : "ranks ") + list;
  }

  const std::vector<RankProcess>& specs_;
  const SupervisorOptions& options_;
  std::vector<Rank> ranks_;
  std::vector<std::string> prefixes_;
  int signal_fd_ = -1;
  int null_fd_ = -1;
  bool signals_installed_ = false;
  sigset_t old_mask_{};
  struct sigaction old_sigchld_ {};
  rlimit old_nofile_{};
  bool nofile_raised_ = false;

  std::optional<int> exit_code_;
  std::string stop_note_;   // why the ranks get SIGTERM: "still running 5 s after rank 1 failed"
  bool signalled_ = false;  // the launcher has signalled the ranks
  std::optional<Clock::time_point> term_at_, kill_at_, give_up_at_;
  bool term_sent_ = false, kill_sent_ = false;
};

}  // namespace

int run_rank_processes(const std::vector<RankProcess>& ranks, const SupervisorOptions& options) {
  if (!(options.grace_seconds >= 0) || !(options.kill_after_seconds >= 0) || !(options.give_up_seconds >= 0))
    throw std::invalid_argument("run_rank_processes: negative or NaN wait");
  Supervisor supervisor(ranks, options);
  return supervisor.run();
}

}  // namespace h2::tools
