// Multi-process DiComm tests: ranks started by `h2 launch` run collectives_rank.cpp, over shm and
// tcp;ofi_rxm on loopback, with direct and host-staged memory, on two different plugins, and with
// a peer that dies, aborts, stalls or presents a wrong token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli_test_support.hpp"

namespace {

using h2::test::CliResult;
using h2::test::env_or_fail;
using h2::test::run_h2;
using testing::HasSubstr;

// Runs N ranks of the test program in `mode`; `environment` applies to every rank.
CliResult launch(int ranks, const std::string& mode, const std::string& environment = "",
                 const std::string& launch_flags = "") {
  const std::string rank_program = env_or_fail("H2_TEST_RANK_PROGRAM");
  return run_h2("launch -n " + std::to_string(ranks) + " " + launch_flags + " -- " + rank_program + " " + mode,
                environment);
}

// As launch, but rank R also exports `exports[R]` ("NAME=value ..."): ranks set up unlike the rest.
CliResult launch_with_rank_exports(int ranks, const std::string& mode, const std::map<int, std::string>& exports,
                                   const std::string& environment = "") {
  std::string script;
  for (const auto& [rank, assignments] : exports)
    script += "if [ $H2_RANK = " + std::to_string(rank) + " ]; then export " + assignments + "; fi; ";
  return run_h2("launch -n " + std::to_string(ranks) + " -- sh -c '" + script + "exec " +
                    env_or_fail("H2_TEST_RANK_PROGRAM") + " " + mode + "'",
                environment);
}

void expect_all_passed(const CliResult& result, int ranks) {
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < ranks; ++r) {
    // "rank R: N of N checks passed" with the same N twice.
    const std::regex all_passed("rank " + std::to_string(r) + ": ([0-9]+) of \\1 checks passed");
    EXPECT_TRUE(std::regex_search(result.output, all_passed)) << "rank " << r << ":\n" << result.output;
  }
  EXPECT_THAT(result.output, testing::Not(HasSubstr("FAILED"))) << result.output;
}

// Asking for a provider keeps the node transport out: this is libfabric's shm alone.
TEST(Collectives, TwoRanksOverSharedMemory) {
  const CliResult result = launch(2, "check", "H2_FABRIC_PROVIDER=shm");
  expect_all_passed(result, 2);
  EXPECT_THAT(result.output, HasSubstr("provider shm, transport shm\n"));
}

TEST(Collectives, ThreeRanksOverTcp) {
  const CliResult result = launch(3, "check", "H2_FABRIC_PROVIDER='tcp;ofi_rxm'");
  expect_all_passed(result, 3);
  EXPECT_THAT(result.output, HasSubstr("provider tcp;ofi_rxm"));
}

// On their own, ranks of one node talk through the node transport (cross-memory attach).
TEST(Collectives, FourRanksUseTheNodeTransportOnOneNode) {
  const CliResult result = launch(4, "check");
  expect_all_passed(result, 4);
  EXPECT_THAT(result.output, HasSubstr("rank 0: device cpu-reference:0, provider shm, transport shm; node transport "
                                       "(mapped device memory, else cma) to ranks 1,2,3"));
  EXPECT_THAT(result.output, HasSubstr("rank 2: device cpu-reference:0, provider shm, transport shm; node transport "
                                       "(mapped device memory, else cma) to ranks 0,1,3"));
}

// Told it may, DiComm runs a communicator whose ranks are all cpu-reference devices on one node on
// the plugin's own collective library (ABI 1.5, shared memory); every check still holds, and the
// split communicators decide for themselves.
TEST(Collectives, FourRanksOnThePluginsCollectiveLibrary) {
  const CliResult result = launch(4, "check", "H2_DICOMM_VENDOR_COLLECTIVES=auto H2_LOG_LEVEL=info");
  expect_all_passed(result, 4);
  EXPECT_THAT(result.output, HasSubstr("communicator 'world': collectives on cpu-reference shared memory"));
  EXPECT_THAT(result.output, HasSubstr("communicator 'world/split(1)': collectives on cpu-reference shared memory"));
}

// Four ranks run large allreduces by recursive halving and doubling unless told otherwise; the ring
// must stay right for them too (and for sub-communicators of other sizes it is what runs).
TEST(Collectives, FourRanksByRing) {
  const CliResult result = launch(4, "check", "H2_DICOMM_ALLREDUCE=ring");
  expect_all_passed(result, 4);
}

TEST(Collectives, AllreduceAlgorithmMustBeKnownAndAlike) {
  CliResult result = launch(2, "check", "H2_DICOMM_ALLREDUCE=tree");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("H2_DICOMM_ALLREDUCE='tree' is not one of auto, ring, halving_doubling"));
  result = launch_with_rank_exports(2, "check", {{1, "H2_DICOMM_ALLREDUCE=ring"}});
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(
      result.output,
      HasSubstr("rank 1 has another H2_DICOMM_ALLREDUCE than rank 0 (\"ring\", rank 0: \"auto\"); set it alike"));
}

// A message above the fabric's message size goes as parts (by default 512 KiB on tcp;ofi_rxm, none
// on shm). Cut into parts of 4 KiB, every check still holds on both providers: collectives,
// point-to-point in order, messages that arrive before their receives.
TEST(Collectives, MessagesCutIntoSmallPartsOverShmAndTcp) {
  for (const char* provider : {"shm", "'tcp;ofi_rxm'"}) {
    const CliResult result =
        launch(2, "check", std::string("H2_FABRIC_PROVIDER=") + provider + " H2_DICOMM_FABRIC_MESSAGE_BYTES=4096");
    expect_all_passed(result, 2);
  }
}

TEST(Collectives, FabricMessageSizeMustBeSensibleAndAlike) {
  CliResult result = launch(2, "check", "H2_DICOMM_FABRIC_MESSAGE_BYTES=100");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("H2_DICOMM_FABRIC_MESSAGE_BYTES=100 is below 4096 (0 sends every message whole)"));
  // Over tcp;ofi_rxm (default 512 KiB): one rank with another size is refused; one that sets the
  // default explicitly agrees with one that leaves it unset.
  const std::string tcp = "H2_FABRIC_PROVIDER='tcp;ofi_rxm'";
  result = launch_with_rank_exports(2, "check", {{1, "H2_DICOMM_FABRIC_MESSAGE_BYTES=0"}}, tcp);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("H2_DICOMM_FABRIC_MESSAGE_BYTES is 0 on rank 1 and 524288 on rank 0 (where "
                                       "unset, provider 'tcp;ofi_rxm''s default); set it alike"));
  result = launch_with_rank_exports(2, "check", {{1, "H2_DICOMM_FABRIC_MESSAGE_BYTES=524288"}}, tcp);
  expect_all_passed(result, 2);
}

TEST(Collectives, NodeTransportCanBeTurnedOff) {
  const CliResult result = launch(2, "check", "H2_DICOMM_NODE_TRANSPORT=off");
  expect_all_passed(result, 2);
  EXPECT_THAT(result.output, HasSubstr("provider shm, transport shm\n"));
}

// libfabric 1.17's shm without cross-memory attach (containers without ptrace, or this variable)
// copies through bounce buffers and hangs once several messages arrive ahead of their receives
// (ofiwg/libfabric#9143): DiComm picks tcp;ofi_rxm instead, and refuses shm when asked for it.
TEST(Collectives, SharedMemoryWithoutCrossMemoryAttachIsAvoided) {
  CliResult result = launch(2, "check", "FI_SHM_DISABLE_CMA=1 H2_DICOMM_NODE_TRANSPORT=off H2_DICOMM_TIMEOUT=60");
  expect_all_passed(result, 2);
  EXPECT_THAT(result.output, HasSubstr("provider tcp;ofi_rxm"));
  result = launch(2, "check", "FI_SHM_DISABLE_CMA=1 H2_FABRIC_PROVIDER=shm H2_DICOMM_TIMEOUT=60");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("H2_FABRIC_PROVIDER=shm refused"));
  EXPECT_THAT(result.output, HasSubstr("ofiwg/libfabric#9143"));
}

// Rank 1 stages through pinned host memory by request, rank 2's device memory is not host-readable
// (strict mode) so it must stage, rank 0 lets the NIC use device memory: one communicator, over
// tcp and over the node transport.
TEST(Collectives, DirectAndStagedRanksTogether) {
  for (const std::string transport : {"H2_FABRIC_PROVIDER='tcp;ofi_rxm'", "H2_DICOMM_NODE_TRANSPORT=cma"}) {
    const CliResult result =
        launch_with_rank_exports(3, "check", {{1, "H2_DICOMM_STAGING=1"}, {2, "H2_CPU_REFERENCE_STRICT=1"}},
                                 transport + " H2_DICOMM_PIECE_BYTES=65536");
    expect_all_passed(result, 3);
  }
}

// Ranks on two different plugins (separately loaded libraries with their own streams and events).
TEST(Collectives, RanksOnTwoPlugins) {
  const std::string second = env_or_fail("H2_TEST_SECOND_PLUGIN");
  const CliResult result = launch(3, "check", "", "--devices cpu-reference:0," + second + ":0,cpu-reference:0");
  expect_all_passed(result, 3);
  EXPECT_THAT(result.output, HasSubstr("rank 1: device cpu-reference-defective:0"));
}

// Ranks on two plugins, each with its collective library, told to use them: a collective runs as the
// libraries' steps inside each plugin's group and DiComm's between the groups. With groups of one size
// rank i of each group meets rank i of the others, whether the ranks are numbered group by group (a
// reduce-scatter and an allgather then reorder the blocks) or alternately (they need not); with
// groups of two sizes an allreduce sums each piece between the ranks whose shards hold it, and a
// reduce-scatter or an allgather moves slices of the other group's blocks point to point. Every
// check still holds, and each rank's log names the collectives that ran hierarchically.
TEST(Collectives, RanksOnTwoPluginsRunCollectivesHierarchically) {
  const std::string second = env_or_fail("H2_TEST_SECOND_PLUGIN");
  const std::string env = "H2_DICOMM_VENDOR_COLLECTIVES=auto H2_LOG_LEVEL=info";
  const std::string equal =
      "communicator 'world': collectives hierarchical over 2 groups (the plugins' libraries "
      "inside, DiComm between, shard by shard); this rank's group: ";
  const auto ran_hierarchically = [](const CliResult& result, const std::vector<std::string>& kinds) {
    for (const std::string& kind : kinds)
      EXPECT_THAT(result.output, HasSubstr("communicator 'world': first hierarchical " + kind)) << result.output;
  };
  CliResult result =
      launch(4, "check", env, "--devices cpu-reference:0,cpu-reference:0," + second + ":0," + second + ":0");
  expect_all_passed(result, 4);
  EXPECT_THAT(result.output, HasSubstr(equal + "cpu-reference shared memory on ranks 0,1"));
  ran_hierarchically(result, {"allreduce", "reduce_scatter", "allgather", "broadcast"});
  result = launch(4, "check", env, "--devices cpu-reference:0," + second + ":0,cpu-reference:0," + second + ":0");
  expect_all_passed(result, 4);
  EXPECT_THAT(result.output, HasSubstr(equal + "cpu-reference shared memory on ranks 0,2"));
  ran_hierarchically(result, {"allreduce", "reduce_scatter", "allgather", "broadcast"});
  // Groups of 3 and 2: pieces at 0, 1/3, 1/2 and 2/3 of the tensor, rank 3 holding two of them;
  // reduce-scatters and allgathers exchange slices of the other group's blocks.
  const std::string several =
      "communicator 'world': collectives hierarchical over 2 groups (the plugins' libraries inside, DiComm "
      "between, piece by piece); this rank's group: ";
  result = launch(5, "check", env,
                  "--devices cpu-reference:0,cpu-reference:0,cpu-reference:0," + second + ":0," + second + ":0");
  expect_all_passed(result, 5);
  EXPECT_THAT(result.output, HasSubstr(several + "cpu-reference shared memory on ranks 0,1,2"));
  ran_hierarchically(result, {"allreduce", "reduce_scatter", "allgather", "broadcast"});
  result = launch(3, "check", env, "--devices cpu-reference:0,cpu-reference:0," + second + ":0");
  expect_all_passed(result, 3);
  EXPECT_THAT(result.output, HasSubstr(several + "itself alone on ranks 2"));
  ran_hierarchically(result, {"allreduce", "reduce_scatter", "allgather", "broadcast"});
  // Groups interleaved in rank order (2 + 3), each block's slices crossing several owners.
  result = launch(5, "check", env,
                  "--devices " + second + ":0,cpu-reference:0," + second + ":0,cpu-reference:0,cpu-reference:0");
  expect_all_passed(result, 5);
  EXPECT_THAT(result.output, HasSubstr(several + "cpu-reference shared memory on ranks 1,3,4"));
  ran_hierarchically(result, {"allreduce", "reduce_scatter", "allgather", "broadcast"});
}

// Three vendors' plugins, each with its own library: cpu-reference's shared memory on ranks 0 and 1,
// the Ascend plugin's HCCL (over the emulated CANN) on ranks 2 and 3, the MLU plugin's CNCL (over
// the emulated Neuware) on ranks 4 and 5, DiComm between them.
TEST(Collectives, ThreeVendorsRunCollectivesOnTheirOwnLibraries) {
  const std::string env =
      "H2_DICOMM_VENDOR_COLLECTIVES=auto H2_LOG_LEVEL=info ASCEND_HOME_PATH=" + env_or_fail("H2_TEST_ASCEND_HOME") +
      " NEUWARE_HOME=" + env_or_fail("H2_TEST_NEUWARE_HOME");
  const CliResult result =
      launch(6, "check", env, "--devices cpu-reference:0,cpu-reference:0,ascend:0,ascend:0,mlu:0,mlu:0");
  expect_all_passed(result, 6);
  const std::string hierarchy =
      "h2 [info] dicomm: communicator 'world': collectives hierarchical over 3 groups (the "
      "plugins' libraries inside, DiComm between, shard by shard); this rank's group: ";
  EXPECT_THAT(result.output, HasSubstr("[rank 0] " + hierarchy + "cpu-reference shared memory on ranks 0,1"));
  EXPECT_THAT(result.output, HasSubstr("[rank 2] " + hierarchy + "HCCL (emulated) on ranks 2,3"));
  EXPECT_THAT(result.output, HasSubstr("[rank 4] " + hierarchy + "CNCL 1.25.0 (emulated) on ranks 4,5"));
}

// Three plugin groups of three sizes (MLU 1, Ascend 2, cpu-reference 3, interleaved in rank order),
// hierarchical at every size (H2_DICOMM_SMALL_BYTES=0): one element, counts no group divides, every
// dtype and reduction of the checks go through the slices of block_layout.
TEST(Collectives, ThreeGroupsOfThreeSizesRunEveryCollectiveHierarchically) {
  const std::string env =
      "H2_DICOMM_VENDOR_COLLECTIVES=auto H2_DICOMM_SMALL_BYTES=0 H2_LOG_LEVEL=info ASCEND_HOME_PATH=" +
      env_or_fail("H2_TEST_ASCEND_HOME") + " NEUWARE_HOME=" + env_or_fail("H2_TEST_NEUWARE_HOME");
  const CliResult result =
      launch(6, "check", env, "--devices mlu:0,ascend:0,cpu-reference:0,ascend:0,cpu-reference:0,cpu-reference:0");
  expect_all_passed(result, 6);
  EXPECT_THAT(result.output, HasSubstr("collectives hierarchical over 3 groups"));
  for (const std::string kind : {"allreduce", "reduce_scatter", "allgather", "broadcast"})
    EXPECT_THAT(result.output, HasSubstr("communicator 'world': first hierarchical " + kind));
}

// The same three plugins on DiComm's own algorithms alone: every rank still ends an average with the
// same bits, though each plugin's kernels divide (an average that multiplied by 1/3 rounded it as a
// double on one plugin and as a float on another).
TEST(Collectives, ThreeVendorsOnDiCommAloneHoldTheSameBits) {
  const std::string env =
      "ASCEND_HOME_PATH=" + env_or_fail("H2_TEST_ASCEND_HOME") + " NEUWARE_HOME=" + env_or_fail("H2_TEST_NEUWARE_HOME");
  const CliResult result = launch(3, "check", env, "--devices cpu-reference:0,ascend:0,mlu:0");
  expect_all_passed(result, 3);
}

// Rank 0's program leaves DiComm through an exception while the others wait in the store for its
// split: closing, it waits a few seconds at the last barrier, then fails the job instead of waiting
// out the whole timeout there (while the others waited out theirs), and they are told why.
TEST(Faults, ARankLeavingThroughAnExceptionFailsTheOthersAtOnce) {
  const CliResult result = launch(3, "throw", "H2_DICOMM_TIMEOUT=120");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 0: error: rank 0 throws on purpose"));
  // A rank that waits for rank 0's key is told rank 0 failed; one that comes after rank 0 has gone,
  // that the store went after rank 0 had failed.
  for (const std::string rank : {"1", "2"})
    EXPECT_TRUE(std::regex_search(result.output,
                                  std::regex("\\[rank " + rank + "\\] rank " + rank + ": error: rank " + rank +
                                             ": Store::(get|set)\\('dicomm/split/0/0/[0-2]'\\): .*rank 0 (had )?failed "
                                             "\\(aborted: its program left DiComm through an exception")))
        << result.output;
  EXPECT_THAT(result.output, Not(HasSubstr("timed out")));
}

// Every rank leaves DiComm through an exception that it catches further up: they all still meet at
// the last barrier, and nobody is failed or aborted.
TEST(Faults, RanksThatAllLeaveThroughACaughtExceptionCloseCleanly) {
  const CliResult result = launch(3, "caught", "H2_LOG_LEVEL=info");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const std::string rank : {"0", "1", "2"})
    EXPECT_THAT(result.output, HasSubstr("rank " + rank + ": caught: every rank throws on purpose"));
  EXPECT_THAT(result.output, Not(HasSubstr("failed")));
  EXPECT_THAT(result.output, Not(HasSubstr("abort")));
}

// Empty messages between others on one tag, from a rank that stages through host memory (the
// emulated Ascend): every message still arrives in the order sent.
TEST(Collectives, EmptyMessagesKeepTheOrderOfAStagedSender) {
  const std::string env = "ASCEND_HOME_PATH=" + env_or_fail("H2_TEST_ASCEND_HOME");
  for (int run = 0; run < 3; ++run) {
    const CliResult result = launch(2, "order", env, "--devices ascend:0,cpu-reference:0");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, HasSubstr("rank 1: 1 of 1 checks passed"));
  }
}

TEST(Faults, KilledPeerIsNamedByTheOthersWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult result = launch(3, "kill", "H2_DICOMM_TIMEOUT=60", "--grace 30");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 2 (pid"));
  EXPECT_THAT(result.output, HasSubstr("was killed by signal 9"));
  // Detection comes from the store, long before the 60 s timeout.
  EXPECT_THAT(result.output, testing::ContainsRegex("rank 0: CommError\\(peer 2\\): DiComm: rank 2 failed"));
  EXPECT_THAT(result.output, testing::ContainsRegex("rank 1: CommError\\(peer 2\\): DiComm: rank 2 failed"));
  EXPECT_LT(seconds, 50) << result.output;
  // The killed rank left nothing in /dev/shm: every shared-memory name (libfabric's shm region, the
  // node transport's segment) was unlinked once the peers had opened it.
  std::smatch killed;
  ASSERT_TRUE(std::regex_search(result.output, killed, std::regex("rank 2 \\(pid ([0-9]+)"))) << result.output;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    for (const std::string& prefix : {"h2-" + killed[1].str() + "-", "h2-dicomm-" + killed[1].str() + "-"})
      EXPECT_FALSE(name.starts_with(prefix)) << "left in /dev/shm by the killed rank: " << name;
  }
}

// A stopped rank (SIGSTOP of one worker of h2 train) used to end the job after about twice the
// timeout, with a rank naming a peer that was alive: the store now fails the rank it stops hearing
// from within the timeout, and every rank names it.
TEST(Faults, StoppedPeerIsNamedWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult result = launch(3, "stop", "H2_DICOMM_TIMEOUT=6", "--grace 2");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.exit_code, 0) << result.output;
  for (const char* rank : {"rank 0: ", "rank 1: "})
    EXPECT_THAT(result.output,
                testing::ContainsRegex(std::string(rank) + "CommError\\(peer 2\\): DiComm: rank 2 failed: stopped "
                                                           "responding"))
        << result.output;
  // 90% of the timeout, then the launcher's grace and its SIGKILL 3 s after SIGTERM; not 2 x 6 s.
  EXPECT_LT(seconds, 6 * 1.1 + 2 + 3 + 3) << result.output;
}

// A rank that hangs in its own code (its DiComm threads, and with them its heartbeat, still running)
// is not failed by the store; its peers time out, and each used to blame the peer it was waiting on:
// in a ring, a rank that was waiting too. Every rank now names the one that is not waiting in DiComm.
TEST(Faults, HungPeerIsNamedWhenTheWaitsTimeOut) {
  const auto start = std::chrono::steady_clock::now();
  const CliResult result = launch(3, "hang", "H2_DICOMM_TIMEOUT=4", "--grace 2");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.exit_code, 0) << result.output;
  // The first to time out names rank 2 and aborts; the other fails with that message, or its own.
  EXPECT_THAT(result.output, testing::ContainsRegex("rank [01]: CommError\\(peer 2\\): DiComm: timed out after 4.000 s "
                                                    "waiting for .*; rank 2 is alive but not waiting in DiComm: out of "
                                                    "it for [0-9.]+ s \\(hanging in its own code"))
      << result.output;
  for (const char* rank : {"rank 0: ", "rank 1: "})
    EXPECT_THAT(result.output,
                testing::ContainsRegex(std::string(rank) + "CommError.*rank 2 is alive but not waiting in DiComm"))
        << result.output;
  // The timeout, then the launcher's grace and SIGTERM, which ends the hung rank.
  EXPECT_LT(seconds, 4 * 1.1 + 2 + 3 + 3) << result.output;
}

// The same on the plugin's library: its work on the ranks' streams fails (the library sees the
// process gone, and DiComm aborts it), and DiComm refuses every later collective naming the rank.
TEST(Faults, KilledPeerIsNamedWhenThePluginsLibraryRunsTheCollectives) {
  const CliResult result = launch(3, "kill", "H2_DICOMM_TIMEOUT=60 H2_DICOMM_VENDOR_COLLECTIVES=auto", "--grace 30");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, testing::ContainsRegex("rank 0: CommError\\(peer 2\\): DiComm: rank 2 failed"));
  EXPECT_THAT(result.output, testing::ContainsRegex("rank 1: CommError\\(peer 2\\): DiComm: rank 2 failed"));
}

TEST(Faults, AbortReachesEveryRank) {
  const CliResult result = launch(3, "abort", "H2_DICOMM_TIMEOUT=60");
  EXPECT_NE(result.exit_code, 0) << result.output;
  for (const char* rank : {"rank 1: ", "rank 2: "})
    EXPECT_THAT(result.output, HasSubstr(std::string(rank) + "CommError(peer 0): DiComm: rank 0 failed: aborted: "
                                                             "the test aborts on purpose"))
        << result.output;
}

TEST(Faults, StalledPeerTimesOutWithAMessage) {
  const CliResult result = launch(3, "stall", "H2_DICOMM_TIMEOUT=2", "--grace 10");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 0: error: "));
  EXPECT_THAT(result.output, HasSubstr("timed out"));
  EXPECT_THAT(result.output, HasSubstr("'dicomm/rank/2'"));
}

// A message shorter than its receive would leave the rest of the tensor as it was, silently; a
// longer one cannot fit. Both fail the receive with the sizes, over every transport, also where the
// fabric cuts messages into parts (H2_DICOMM_FABRIC_MESSAGE_BYTES) and the two sides' parts differ.
// There a longer message leaves parts behind on its tag, and the next receive on the tag must fail
// on them too, not take the back half of the message as a whole one of its size.
TEST(Faults, SendAndReceiveOfDifferentSizesFail) {
  const std::string cut = " H2_DICOMM_FABRIC_MESSAGE_BYTES=4096";
  for (const std::string& transport :
       {"H2_FABRIC_PROVIDER=shm" + cut, "H2_FABRIC_PROVIDER='tcp;ofi_rxm'" + cut, std::string("H2_FABRIC_PROVIDER=shm"),
        std::string("H2_FABRIC_PROVIDER='tcp;ofi_rxm'"), std::string()}) {
    const CliResult result = launch(2, "sizes", transport + " H2_DICOMM_TIMEOUT=30");
    const std::string context = transport + "\n" + result.output;
    const std::string head = "rank 1: CommError(peer 0): DiComm: receive from rank 0 ";
    EXPECT_THAT(result.output, HasSubstr(head + "expected 8000 bytes and got a message of 4000")) << context;
    EXPECT_THAT(result.output, HasSubstr(head + "expected 32768 bytes and got a message of 16384")) << context;
    // Cut into parts, the longer message's first part fails the receive, and what it left behind
    // fails the next receive on the tag.
    if (transport.ends_with(cut)) {
      EXPECT_THAT(result.output, HasSubstr(head + "expected 8192 bytes and got a message of 16384")) << context;
      EXPECT_THAT(result.output, HasSubstr("rank 1: the receive after it: CommError(peer 0): DiComm: receive from "
                                           "rank 0 expected 8192 bytes and got a message of 16384"))
          << context;
    }
    EXPECT_THAT(result.output, testing::ContainsRegex("rank 1: CommError\\(peer 0\\): DiComm: receive from rank 0 "
                                                      "\\(2000 bytes\\) failed: .*"))
        << context;
    EXPECT_THAT(result.output, testing::Not(HasSubstr("floats received"))) << context;
  }
}

TEST(Faults, WrongJobTokenIsRefused) {
  const CliResult result = launch(3, "token", "H2_DICOMM_TIMEOUT=5", "--grace 10");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("refused rank 1: wrong job token (H2_JOB_TOKEN)"));
}

TEST(Faults, ProvidersThatDifferBetweenRanksAreRefused) {
  const CliResult result = launch_with_rank_exports(2, "check", {{1, "H2_FABRIC_PROVIDER=\"tcp;ofi_rxm\""}},
                                                    "H2_FABRIC_PROVIDER=shm H2_DICOMM_TIMEOUT=10");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 1 asks for provider 'tcp;ofi_rxm' but rank 0 for 'shm'"));
}

TEST(Faults, UnknownProviderIsNamed) {
  const CliResult result = launch(2, "check", "H2_FABRIC_PROVIDER=carrier-pigeon H2_DICOMM_TIMEOUT=10");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("has no libfabric provider 'carrier-pigeon'"));
}

}  // namespace
