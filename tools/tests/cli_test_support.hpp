// Running the `h2` binary from tests: its output, its exit code, and a failure if it crashed.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace h2::test {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string env_or_fail(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string(name) + " is not set; run through meson test");
  return value;
}

// Runs a shell command line, stdout and stderr together; the status as pclose gives it.
inline int run_shell(const std::string& line, std::string& output) {
  const std::string command = line + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::array<char, 4096> chunk;
  size_t n;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) output.append(chunk.data(), n);
  return pclose(pipe);
}

// Runs `h2 ARGS` with extra environment assignments ("NAME=value ...") in front.
inline CliResult run_h2(const std::string& args, const std::string& environment = "") {
  CliResult result;
  const int status = run_shell(environment + " " + env_or_fail("H2_TOOL") + " " + args, result.output);
  EXPECT_TRUE(WIFEXITED(status)) << "h2 " << args << " did not exit normally (crashed?):\n" << result.output;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace h2::test
