// `h2 bench comm`'s byte-size options as a user types them: "16M" as nccl-tests takes it, and a wrong
// value refused naming the option and the value before anything runs; and every collective on ranks
// of an accelerator plugin (the emulated Ascend).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli_test_support.hpp"

namespace {

using h2::test::CliResult;
using h2::test::env_or_fail;
using h2::test::run_h2;
using testing::HasSubstr;

// One rank on cpu-reference (no launcher: a world of one), the smallest run that prints its rows.
CliResult bench(const std::string& args) {
  return run_h2("bench comm --op allreduce --iters 1 --warmup 0 " + args, "H2_DEVICE=cpu-reference");
}

TEST(H2BenchComm, ByteSizesTakeUnits) {
  const CliResult r = bench("--min-bytes 4K --max-bytes 8KiB --scale-below 1m");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::ContainsRegex("\n +4096 +1024 +f32"));
  EXPECT_THAT(r.output, testing::ContainsRegex("\n +8192 +2048 +f32"));
  EXPECT_THAT(r.output, testing::Not(HasSubstr("16384")));
}

TEST(H2BenchComm, WrongByteSizesNameTheOptionAndTheValue) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{"--max-bytes 16X", "--max-bytes: '16X' has an unknown unit 'X'"},
           Case{"--max-bytes -5", "--max-bytes: '-5' is negative"},
           Case{"--min-bytes 1.5M", "--min-bytes: '1.5M' is not a whole number of bytes"},
           Case{"--max-bytes 99999999999999999999", "--max-bytes: '99999999999999999999' is too large"},
           Case{"--max-bytes 32G", "--max-bytes: '32G' (34359738368 bytes) is not in [4, 16GiB]"},
           Case{"--min-bytes 2", "--min-bytes: '2' (2 bytes) is not in [4, 16GiB]"},
           Case{"--max-bytes 16MB", "--max-bytes: '16MB': write 16M or 16MiB"},
           Case{"--scale-below lots", "--scale-below: 'lots' is not a byte size"},
       }) {
    const CliResult r = bench(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
  const CliResult reversed = bench("--min-bytes 1M --max-bytes 64K");
  EXPECT_EQ(reversed.exit_code, 2) << reversed.output;
  EXPECT_THAT(reversed.output, HasSubstr("--min-bytes 1048576 is above --max-bytes 65536"));
}

// The Ascend plugin has no f64 operators: the ranks' timings and wrong-element counts travel as bytes
// and are reduced on the host (an f64 allreduce of them failed on every Ascend rank, and the other
// ranks then waited out DiComm's timeout: a rank that fails now aborts the job, naming itself).
TEST(H2BenchComm, EveryCollectiveRunsOnAnAcceleratorsRanks) {
  const CliResult r = run_h2("launch -n 2 --devices ascend:0,ascend:0 -- " + env_or_fail("H2_TOOL") +
                                 " bench comm --op all --min-bytes 4K --max-bytes 4K --iters 1 --warmup 0",
                             "ASCEND_HOME_PATH=" + env_or_fail("H2_TEST_ASCEND_HOME") + " H2_DICOMM_TIMEOUT=60");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* op : {"allreduce", "allgather", "reduce_scatter", "broadcast", "sendrecv", "pingpong"})
    EXPECT_THAT(r.output, HasSubstr(std::string("# h2 bench comm: ") + op + ", 2 ranks")) << r.output;
  EXPECT_THAT(r.output, testing::ContainsRegex("\\[rank 0\\] +4096 +1024 +f32 +sum +[0-9.]+ +[0-9.]+ +[0-9.]+ +0\n"));
  EXPECT_THAT(r.output, HasSubstr("# collectives: on DiComm's own algorithms (H2_DICOMM_VENDOR_COLLECTIVES is off)"));
}

// Each table ends saying what ran the collectives: here the emulated HCCL, the plugin's library.
TEST(H2BenchComm, SaysWhichLibraryRanTheCollectives) {
  const CliResult r = run_h2("launch -n 2 --devices ascend:0,ascend:0 -- " + env_or_fail("H2_TOOL") +
                                 " bench comm --op allreduce --min-bytes 4K --max-bytes 4K --iters 1 --warmup 0",
                             "ASCEND_HOME_PATH=" + env_or_fail("H2_TEST_ASCEND_HOME") +
                                 " H2_DICOMM_TIMEOUT=60 H2_DICOMM_VENDOR_COLLECTIVES=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, testing::ContainsRegex("# collectives: on HCCL[^\n]*, the plugin's collective library"));
}

}  // namespace
