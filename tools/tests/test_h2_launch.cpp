// `h2 launch` as a user runs it: every rank gets its environment, output is prefixed line by line on the
// right stream, a failing or killed rank stops the job quickly with its exit code, signals reach the
// ranks, and bad usage is refused. Every run has its own time limit, so a hung launcher fails a test
// instead of hanging the suite.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_support.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using h2::test::env_or_fail;
using testing::HasSubstr;
using testing::Not;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct Result {
  int exit_code = -1;  // -1: killed by a signal or by the time limit
  bool timed_out = false;
  std::string out, err;
  double seconds = 0;
};

// `h2 ARGS` started with fork/exec (no shell: arguments arrive verbatim), stdout and stderr collected
// apart. The caller's H2_JOB_TOKEN and H2_LOG_LEVEL are removed unless given in `env` ("NAME=value").
class H2Process {
 public:
  explicit H2Process(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv_strings = {env_or_fail("H2_TOOL")};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text = *entry;
      if (text.rfind("H2_JOB_TOKEN=", 0) != 0 && text.rfind("H2_LOG_LEVEL=", 0) != 0) env_strings.push_back(text);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> argv, envp;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      // Default signal handling, whatever the test runner set: the launcher decides what it forwards.
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int null_fd = open("/dev/null", O_RDONLY);
      dup2(null_fd, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      execve(argv[0], argv.data(), envp.data());
      const std::string message = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
      [[maybe_unused]] const ssize_t written = write(2, message.data(), message.size());
      _exit(126);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }

  ~H2Process() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  pid_t pid() const { return pid_; }

  // Collects output until stdout holds `count` copies of `text`; false when the time is up first.
  bool wait_for_stdout(const std::string& text, size_t count, double timeout_s) {
    const auto deadline = after(timeout_s);
    while (occurrences(result_.out, text) < count) {
      if (Clock::now() >= deadline || !read_some(deadline)) return occurrences(result_.out, text) >= count;
    }
    return true;
  }

  // Waits for the launcher to exit and its output to end; kills it at the time limit.
  Result finish(double timeout_s) {
    const auto deadline = after(timeout_s);
    while ((out_fd_ >= 0 || err_fd_ >= 0) && read_some(deadline)) {
    }
    int status = 0;
    while (true) {
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) break;
      if (Clock::now() >= deadline) {
        result_.timed_out = true;
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    reaped_ = true;
    result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    result_.exit_code = WIFEXITED(status) && !result_.timed_out ? WEXITSTATUS(status) : -1;
    return result_;
  }

 private:
  static size_t occurrences(const std::string& haystack, const std::string& needle) {
    size_t count = 0;
    for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++count;
    return count;
  }

  // One poll and the reads it allows; false when the time is up or both pipes have ended.
  bool read_some(Clock::time_point deadline) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (fds.empty()) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    if (poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) return Clock::now() < deadline;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      char buffer[65536];
      const ssize_t n = read(p.fd, buffer, sizeof buffer);
      int& fd = p.fd == out_fd_ ? out_fd_ : err_fd_;
      std::string& text = p.fd == out_fd_ ? result_.out : result_.err;
      if (n > 0) {
        text.append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fd);
        fd = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool reaped_ = false;
  Clock::time_point start_;
  Result result_;
};

Result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}, double timeout_s = 60) {
  H2Process process(args, env);
  Result result = process.finish(timeout_s);
  EXPECT_FALSE(result.timed_out) << "h2 did not finish within " << timeout_s << " s\nstdout:\n"
                                 << result.out << "\nstderr:\n"
                                 << result.err;
  return result;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) result.push_back(line);
  return result;
}

bool process_exists(pid_t pid) {
  return kill(pid, 0) == 0 || errno != ESRCH;
}

// Pids printed by the ranks as "[rank R] pid P".
std::map<int, pid_t> printed_pids(const std::string& out) {
  std::map<int, pid_t> pids;
  const std::regex pattern(R"(\[rank (\d+)\] pid (\d+))");
  for (const std::string& line : lines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, pattern)) pids[std::stoi(m[1])] = static_cast<pid_t>(std::stol(m[2]));
  }
  return pids;
}

TEST(H2Launch, EveryRankGetsItsEnvironment) {
  const auto r = run({"launch", "-n", "3", "--", "sh", "-c",
                      "echo $H2_RANK $H2_WORLD_SIZE $H2_LOCAL_RANK $H2_LOCAL_WORLD_SIZE $H2_MASTER_ADDR "
                      "$H2_MASTER_PORT $H2_JOB_TOKEN ${H2_DEVICE-no-device}"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "") << "nothing but the ranks' output by default";
  const std::regex pattern(R"(\[rank (\d)\] (\d) 3 (\d) 3 127\.0\.0\.1 (\d+) ([0-9a-f]{32}) no-device)");
  std::set<int> ranks;
  std::set<std::string> ports, tokens;
  const auto out_lines = lines(r.out);
  ASSERT_EQ(out_lines.size(), 3u) << r.out;
  for (const std::string& line : out_lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    EXPECT_EQ(m[1], m[2]) << "the prefix names the rank: " << line;
    EXPECT_EQ(m[2], m[3]) << "local rank = rank on one machine: " << line;
    ranks.insert(std::stoi(m[1]));
    ports.insert(m[4]);
    tokens.insert(m[5]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  ASSERT_EQ(ports.size(), 1u) << "one master port for the job";
  ASSERT_EQ(tokens.size(), 1u) << "one token for the job";
  const int port = std::stoi(*ports.begin());
  EXPECT_GE(port, 1);
  EXPECT_LE(port, 65535);

  // Two jobs get two tokens.
  const auto again = run({"launch", "-n", "1", "--", "sh", "-c", "echo $H2_JOB_TOKEN"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_THAT(again.out, Not(HasSubstr(*tokens.begin())));
}

TEST(H2Launch, KeepsTheCallersTokenAndMasterAndPassesTheCommandVerbatim) {
  const auto r = run({"launch", "-n", "2", "--master-addr", "localhost", "--master-port", "29555", "--", "sh", "-c",
                      "echo $H2_MASTER_ADDR:$H2_MASTER_PORT $H2_JOB_TOKEN"},
                     {"H2_JOB_TOKEN=token-from-the-caller"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] localhost:29555 token-from-the-caller\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 1] localhost:29555 token-from-the-caller\n"));

  // The command's own flags, even ones the launcher has, are the command's.
  const auto flags = run({"launch", "-n", "1", "--", "printf", "%s|", "-n", "--devices", "x", "--", "--help"});
  ASSERT_EQ(flags.exit_code, 0) << flags.out << flags.err;
  EXPECT_EQ(flags.out, "[rank 0] -n|--devices|x|--|--help|\n");
}

TEST(H2Launch, DevicesOnePerJobOrOnePerRank) {
  const auto one = run({"launch", "-n", "3", "--devices", "cpu-reference", "--", "sh", "-c", "echo $H2_DEVICE"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  for (const char* rank : {"0", "1", "2"})
    EXPECT_THAT(one.out, HasSubstr(std::string("[rank ") + rank + "] cpu-reference\n"));

  const auto each =
      run({"launch", "-n", "3", "--devices", "cuda:0,cuda:1,cpu-reference", "--", "sh", "-c", "echo $H2_DEVICE"});
  ASSERT_EQ(each.exit_code, 0) << each.out << each.err;
  EXPECT_THAT(each.out, HasSubstr("[rank 0] cuda:0\n"));
  EXPECT_THAT(each.out, HasSubstr("[rank 1] cuda:1\n"));
  EXPECT_THAT(each.out, HasSubstr("[rank 2] cpu-reference\n"));

  const auto count = run({"launch", "-n", "3", "--devices", "cuda:0,cuda:1", "--", "true"});
  EXPECT_NE(count.exit_code, 0);
  EXPECT_THAT(count.err, HasSubstr("--devices has 2 entries for 3 ranks"));
  EXPECT_EQ(count.out, "");

  for (const char* bad : {"cuda:x", ":0", "cuda:-1", "cuda:", "cuda:1:2"}) {
    SCOPED_TRACE(bad);
    const auto r = run({"launch", "-n", "1", "--devices", bad, "--", "true"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_THAT(r.err, HasSubstr(std::string("--devices entry '") + bad + "'"));
  }
  const auto empty = run({"launch", "-n", "2", "--devices", "cuda:0,,cuda:1", "--", "true"});
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_THAT(empty.err, HasSubstr("entry 2 of 3 is empty"));
}

// The CPUs each rank may run on, as `nproc` counts them (it honours the affinity mask), by rank.
std::map<int, int> cpus_seen(const Result& result) {
  std::map<int, int> seen;
  const std::regex line(R"(\[rank ([0-9]+)\] ([0-9]+)\n)");
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), line); it != std::sregex_iterator(); ++it)
    seen[std::stoi((*it)[1])] = std::stoi((*it)[2]);
  return seen;
}

TEST(H2Launch, BindCoresGivesEachRankItsShareOfTheCpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  const std::string n = std::to_string(cpus), more = std::to_string(cpus + 1);

  // As many ranks as CPUs or fewer: disjoint blocks that cover them all.
  for (const std::string& ranks : {std::string("1"), n}) {
    SCOPED_TRACE(ranks + " ranks");
    const auto result = run({"launch", "-n", ranks, "--bind", "cores", "--", "nproc"});
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    int total = 0;
    for (const auto& [rank, count] : cpus_seen(result)) total += count;
    EXPECT_EQ(total, cpus) << result.out;
  }
  // More ranks than CPUs: one CPU each, round robin.
  const auto crowded = run({"launch", "-n", more, "--bind", "cores", "--", "nproc"});
  ASSERT_EQ(crowded.exit_code, 0) << crowded.out << crowded.err;
  const auto seen = cpus_seen(crowded);
  EXPECT_EQ(seen.size(), static_cast<size_t>(cpus + 1)) << crowded.out;
  for (const auto& [rank, count] : seen) EXPECT_EQ(count, 1) << "rank " << rank;
  // The default leaves every rank the launcher's CPUs.
  const auto unbound = run({"launch", "-n", more, "--", "nproc"});
  ASSERT_EQ(unbound.exit_code, 0) << unbound.out << unbound.err;
  for (const auto& [rank, count] : cpus_seen(unbound)) EXPECT_EQ(count, cpus) << "rank " << rank;
}

TEST(H2Launch, FailingRankStopsTheOthersWithItsExitCode) {
  // Rank 1 fails after a moment; the others would sleep for a minute (exec: their pid is the sleep's).
  const auto r = run({"launch", "-n", "3", "--grace", "1", "--", "sh", "-c",
                      "echo pid $$; if [ $H2_RANK = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 60"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_LT(r.seconds, 30) << "the sleepers were stopped, not waited for";
  const std::regex failed(R"(h2 launch: rank 1 \(pid \d+\) exited with code 3\n)");
  EXPECT_TRUE(std::regex_search(r.err, failed)) << r.err;
  EXPECT_EQ(r.err.find("exited with code"), r.err.rfind("exited with code")) << "reported once:\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("sending SIGTERM to ranks 0, 2"));
  const auto pids = printed_pids(r.out);
  EXPECT_EQ(pids.size(), 3u) << r.out;
  for (const auto& [rank, pid] : pids) EXPECT_FALSE(process_exists(pid)) << "rank " << rank << " pid " << pid;
}

TEST(H2Launch, RankThatIgnoresSigtermGetsSigkill) {
  const auto r = run({"launch", "-n", "2", "--grace", "0", "--", "sh", "-c",
                      "trap '' TERM; echo pid $$; if [ $H2_RANK = 1 ]; then sleep 0.5; exit 4; fi; "
                      "while :; do sleep 0.1; done"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_LT(r.seconds, 30);
  EXPECT_THAT(r.err, HasSubstr("sending SIGTERM to rank 0"));
  EXPECT_THAT(r.err, HasSubstr("sending SIGKILL to rank 0"));
  for (const auto& [rank, pid] : printed_pids(r.out)) EXPECT_FALSE(process_exists(pid)) << "rank " << rank;
}

TEST(H2Launch, RankKilledByASignal) {
  const auto r = run({"launch", "-n", "2", "--grace", "1", "--", "sh", "-c",
                      "if [ $H2_RANK = 1 ]; then kill -9 $$; fi; exec sleep 60"});
  EXPECT_EQ(r.exit_code, 137) << r.out << r.err;
  EXPECT_LT(r.seconds, 30);
  const std::regex killed(R"(h2 launch: rank 1 \(pid \d+\) was killed by signal 9 \(Killed\))");
  EXPECT_TRUE(std::regex_search(r.err, killed)) << r.err;
}

TEST(H2Launch, ForwardsSigtermToEveryRank) {
  H2Process launcher(
      {"launch", "-n", "2", "--", "sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo ready; sleep 60 & wait"});
  ASSERT_TRUE(launcher.wait_for_stdout("] ready\n", 2, 30)) << "the ranks did not start";
  ASSERT_EQ(kill(launcher.pid(), SIGTERM), 0);
  const Result r = launcher.finish(30);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 143) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] got TERM\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 1] got TERM\n"));
  EXPECT_THAT(r.err, HasSubstr("got SIGTERM; forwarding it to ranks 0-1"));
  EXPECT_THAT(r.err, Not(HasSubstr("exited with code"))) << "ranks stopped by the launcher are not failures";
}

TEST(H2Launch, ForwardsSigintAndSighup) {
  for (int sig : {SIGINT, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    H2Process launcher({"launch", "-n", "2", "--", "sh", "-c", "echo pid $$; exec sleep 60"});
    ASSERT_TRUE(launcher.wait_for_stdout("] pid ", 2, 30)) << "the ranks did not start";
    ASSERT_EQ(kill(launcher.pid(), sig), 0);
    const Result r = launcher.finish(30);
    ASSERT_FALSE(r.timed_out) << r.out << r.err;
    EXPECT_EQ(r.exit_code, 128 + sig) << r.out << r.err;
    EXPECT_LT(r.seconds, 30);
    for (const auto& [rank, pid] : printed_pids(r.out)) EXPECT_FALSE(process_exists(pid)) << "rank " << rank;
  }
}

TEST(H2Launch, OutputGoesToTheRightStreamWithPartialLastLines) {
  const auto r = run({"launch", "-n", "2", "--", "sh", "-c",
                      "echo out-$H2_RANK; echo err-$H2_RANK >&2; printf 'tail-%s' $H2_RANK; printf 'etail' >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* rank : {"0", "1"}) {
    const std::string p = std::string("[rank ") + rank + "] ";
    EXPECT_THAT(r.out, HasSubstr(p + "out-" + rank + "\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "tail-" + rank + "\n"));
    EXPECT_THAT(r.err, HasSubstr(p + "err-" + rank + "\n"));
    EXPECT_THAT(r.err, HasSubstr(p + "etail\n"));
  }
  EXPECT_THAT(r.out, Not(HasSubstr("err-")));
  EXPECT_THAT(r.err, Not(HasSubstr("out-")));

  const auto plain = run({"launch", "-n", "1", "--no-prefix", "--", "sh", "-c", "echo one; printf two"});
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out, "one\ntwo\n");
}

TEST(H2Launch, LinesOfDifferentRanksNeverMix) {
  // Four ranks write 400 lines of 300 characters each as fast as they can, in pieces.
  const auto r = run({"launch", "-n", "4", "--", "sh", "-c",
                      "x=$(printf '%0300d' 0); i=0; while [ $i -lt 400 ]; do printf '%s:' $H2_RANK; "
                      "printf '%s\\n' $x; i=$((i+1)); done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex line_pattern(R"(\[rank (\d)\] (\d):0{300})");
  std::map<std::string, int> per_rank;
  for (const std::string& line : lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_pattern)) << "mixed line: " << line.substr(0, 200);
    ASSERT_EQ(m[1], m[2]);
    ++per_rank[m[1]];
  }
  EXPECT_EQ(per_rank, (std::map<std::string, int>{{"0", 400}, {"1", 400}, {"2", 400}, {"3", 400}}));
}

TEST(H2Launch, ReturnsWhenRanksLeaveBackgroundProcessesBehind) {
  // The rank exits at once, but a child it started keeps the output pipe open for a while.
  const auto r = run({"launch", "-n", "1", "--", "sh", "-c", "sleep 10 & echo done"}, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] done\n");
  EXPECT_LT(r.seconds, 8) << "the launcher waited for the rank's background child";
}

TEST(H2Launch, InfoLogLevelPrintsASummary) {
  const auto r = run({"launch", "-n", "2", "--master-port", "29556", "--", "true"}, {"H2_LOG_LEVEL=info"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("launch: 2 ranks of true, master 127.0.0.1:29556"));
}

TEST(H2Launch, BadUsageIsRefused) {
  const auto zero = run({"launch", "-n", "0", "--", "true"});
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_THAT(zero.err, HasSubstr("not in range 1 to 4096"));

  const auto too_many = run({"launch", "-n", "4097", "--", "true"});
  EXPECT_NE(too_many.exit_code, 0);

  const auto missing_n = run({"launch", "--", "true"});
  EXPECT_NE(missing_n.exit_code, 0);
  EXPECT_THAT(missing_n.err, HasSubstr("--ranks is required"));

  for (const auto& args : {std::vector<std::string>{"launch", "-n", "2"}, {"launch", "-n", "2", "--"}}) {
    const auto no_command = run(args);
    EXPECT_EQ(no_command.exit_code, 2);
    EXPECT_THAT(no_command.err, HasSubstr("a command to run is required after --"));
  }

  const auto unknown = run({"launch", "-n", "2", "--bogus", "--", "true"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("--bogus"));

  for (const char* port : {"0", "65536", "http"}) {
    SCOPED_TRACE(port);
    const auto bad_port = run({"launch", "-n", "2", "--master-port", port, "--", "true"});
    EXPECT_NE(bad_port.exit_code, 0);
    EXPECT_THAT(bad_port.err, HasSubstr("--master-port"));
  }

  const auto bad_bind = run({"launch", "-n", "2", "--bind", "sockets", "--", "true"});
  EXPECT_NE(bad_bind.exit_code, 0);
  EXPECT_THAT(bad_bind.err, HasSubstr("--bind"));

  for (const char* grace : {"-1", "nan", "soon"}) {
    SCOPED_TRACE(grace);
    const auto bad_grace = run({"launch", "-n", "2", "--grace", grace, "--", "true"});
    EXPECT_NE(bad_grace.exit_code, 0);
    EXPECT_THAT(bad_grace.err, HasSubstr("--grace"));
  }
}

TEST(H2Launch, CommandThatCannotRunExits127) {
  const auto missing = run({"launch", "-n", "3", "--", "h2-no-such-command", "--flag"}, {}, 30);
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.err, "h2 launch: cannot run 'h2-no-such-command': No such file or directory\n");

  const std::filesystem::path script =
      std::filesystem::temp_directory_path() / ("h2_launch_not_executable_" + std::to_string(getpid()));
  std::ofstream(script) << "#!/bin/sh\necho hello\n";
  chmod(script.c_str(), 0644);
  const auto not_executable = run({"launch", "-n", "2", "--", script.string()}, {}, 30);
  EXPECT_EQ(not_executable.exit_code, 127);
  EXPECT_THAT(not_executable.err, HasSubstr("cannot run '" + script.string() + "': Permission denied"));
  std::filesystem::remove(script);
}

}  // namespace
