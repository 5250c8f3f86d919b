// write_file_atomically: whole files or an error naming the file, and never a temporary left behind
// (on a full disk a trace used to end empty, and `h2 plan -o` left its .tmp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "h2/error.hpp"
#include "h2/file_io.hpp"

namespace h2 {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

class FileIo : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("h2-file-io-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path dir_;
};

TEST_F(FileIo, WritesThePartsAndReplacesTheOldFile) {
  const fs::path path = dir_ / "plan.json";
  write_file_atomically(path.string(), "old");
  write_file_atomically(path.string(), {"{\"a\": ", "1}\n"}, true);
  EXPECT_EQ(read(path), "{\"a\": 1}\n");
  EXPECT_FALSE(fs::exists(dir_ / "plan.json.tmp"));
}

TEST_F(FileIo, AFailedWriteNamesTheFileKeepsTheOldOneAndLeavesNoTemporary) {
  const fs::path path = dir_ / "trace.json";
  write_file_atomically(path.string(), "old");
  // The file size limit stands in for a full disk: write() fails part way (EFBIG instead of ENOSPC).
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_file_atomically(path.string(), std::string(1 << 20, 'x'));
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_THAT(message, HasSubstr("cannot write " + path.string() + ": File too large"));
  EXPECT_EQ(read(path), "old");
  EXPECT_FALSE(fs::exists(dir_ / "trace.json.tmp"));

  try {
    write_file_atomically((dir_ / "missing" / "plan.json").string(), "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("cannot write " + (dir_ / "missing" / "plan.json").string() + ": No such file or directory"));
  }
}

}  // namespace
}  // namespace h2
