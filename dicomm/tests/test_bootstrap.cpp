// rank_info_from_environment: every launcher's variables, their precedence, and a clear error for
// every malformed or incomplete value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "h2/dicomm/bootstrap.hpp"
#include "h2/error.hpp"

namespace h2::dicomm {
namespace {

using ::testing::HasSubstr;

// Clears every variable the bootstrap reads (the test may itself run under Slurm or torchrun) and
// restores them afterwards.
class Environment {
 public:
  Environment() {
    for (const char* name : kNames) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~Environment() {
    for (const char* name : kNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  Environment& set(const char* name, const std::string& value) {
    ::setenv(name, value.c_str(), 1);
    return *this;
  }

 private:
  static constexpr const char* kNames[] = {
      "H2_RANK",        "H2_WORLD_SIZE",      "H2_LOCAL_RANK",         "H2_LOCAL_WORLD_SIZE",
      "H2_MASTER_ADDR", "H2_MASTER_PORT",     "H2_JOB_TOKEN",          "RANK",
      "WORLD_SIZE",     "LOCAL_RANK",         "LOCAL_WORLD_SIZE",      "MASTER_ADDR",
      "MASTER_PORT",    "PMIX_RANK",          "PMIX_NAMESPACE",        "SLURM_PROCID",
      "SLURM_NTASKS",   "SLURM_LOCALID",      "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
      "SLURM_NODEID",   "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST",   "SLURM_JOB_ID",
  };
  std::map<std::string, std::string> saved_;
};

// The message of the h2::Error that rank_info_from_environment throws (and checks its status).
std::string error_of_environment() {
  try {
    rank_info_from_environment();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(Bootstrap, NothingSetIsASingleProcess) {
  Environment env;
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::single);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 0);
  EXPECT_EQ(info.token, "");
  EXPECT_EQ(info.describe(), "rank 0 of 1 (single process, store 127.0.0.1, port chosen by rank 0)");
}

TEST(Bootstrap, H2Variables) {
  Environment env;
  env.set("H2_RANK", "2")
      .set("H2_WORLD_SIZE", "8")
      .set("H2_LOCAL_RANK", "2")
      .set("H2_LOCAL_WORLD_SIZE", "4")
      .set("H2_MASTER_ADDR", "head-node")
      .set("H2_MASTER_PORT", "29501")
      .set("H2_JOB_TOKEN", "s3cret");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::h2);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "head-node");  // a host name is kept; it is resolved at connect
  EXPECT_EQ(info.master_port, 29501);
  EXPECT_EQ(info.token, "s3cret");
  EXPECT_EQ(info.describe(), "rank 2 of 8 (h2 launch, store head-node:29501)");
}

TEST(Bootstrap, H2DefaultsToOneNodeOnLoopback) {
  Environment env;
  env.set("H2_RANK", "1").set("H2_WORLD_SIZE", "3").set("H2_MASTER_PORT", "29500");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 3);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
}

TEST(Bootstrap, EmptyVariablesCountAsUnset) {
  Environment env;
  env.set("H2_RANK", "").set("H2_WORLD_SIZE", "");
  EXPECT_EQ(rank_info_from_environment().source, LaunchSource::single);
}

TEST(Bootstrap, SingleProcessHonoursStoreOverrides) {
  Environment env;
  env.set("H2_MASTER_ADDR", "::1").set("H2_MASTER_PORT", "4000").set("H2_JOB_TOKEN", "t");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::single);
  EXPECT_EQ(info.master_addr, "::1");
  EXPECT_EQ(info.master_port, 4000);
  EXPECT_EQ(info.token, "t");
}

TEST(Bootstrap, TorchrunVariables) {
  Environment env;
  env.set("RANK", "3")
      .set("WORLD_SIZE", "4")
      .set("LOCAL_RANK", "1")
      .set("LOCAL_WORLD_SIZE", "2")
      .set("MASTER_ADDR", "10.1.2.3")
      .set("MASTER_PORT", "29400")
      .set("H2_JOB_TOKEN", "tok");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::torchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "10.1.2.3");
  EXPECT_EQ(info.master_port, 29400);
  EXPECT_EQ(info.token, "tok");
  EXPECT_EQ(info.describe(), "rank 3 of 4 (torchrun, store 10.1.2.3:29400)");
}

TEST(Bootstrap, H2StoreVariablesOverrideTorchruns) {
  Environment env;
  env.set("RANK", "0").set("WORLD_SIZE", "2").set("MASTER_ADDR", "a").set("MASTER_PORT", "29400");
  env.set("H2_MASTER_ADDR", "b").set("H2_MASTER_PORT", "29411");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::torchrun);
  EXPECT_EQ(info.master_addr, "b");
  EXPECT_EQ(info.master_port, 29411);
}

TEST(Bootstrap, H2TakesPrecedenceOverTorchrunPmixAndSlurm) {
  Environment env;
  env.set("H2_RANK", "1").set("H2_WORLD_SIZE", "2").set("H2_MASTER_PORT", "5000");
  env.set("RANK", "0").set("WORLD_SIZE", "9").set("MASTER_PORT", "1");
  // PMIx would fail here (no server): that it is not tried shows the precedence.
  env.set("PMIX_RANK", "0").set("PMIX_NAMESPACE", "none");
  env.set("SLURM_PROCID", "5").set("SLURM_NTASKS", "6");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::h2);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
}

TEST(Bootstrap, TorchrunTakesPrecedenceOverPmixAndSlurm) {
  Environment env;
  env.set("RANK", "1").set("WORLD_SIZE", "2").set("MASTER_PORT", "5000");
  env.set("PMIX_RANK", "0").set("PMIX_NAMESPACE", "none");
  env.set("SLURM_PROCID", "5").set("SLURM_NTASKS", "6");
  EXPECT_EQ(rank_info_from_environment().source, LaunchSource::torchrun);
}

void set_slurm(Environment& env) {
  env.set("SLURM_PROCID", "5")
      .set("SLURM_NTASKS", "8")
      .set("SLURM_LOCALID", "1")
      .set("SLURM_TASKS_PER_NODE", "4(x2)")
      .set("SLURM_JOB_NODELIST", "node[01-04,07]")
      .set("SLURM_JOB_ID", "1234567");
}

TEST(Bootstrap, SlurmVariables) {
  Environment env;
  set_slurm(env);
  env.set("H2_JOB_TOKEN", "slurm-token");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.source, LaunchSource::slurm);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "node01");
  EXPECT_EQ(info.master_port, 29500 + 4567);  // 29500 + SLURM_JOB_ID % 10000
  EXPECT_EQ(info.token, "slurm-token");
  EXPECT_EQ(info.describe(), "rank 5 of 8 (Slurm, store node01:34067)");
}

TEST(Bootstrap, SlurmTasksPerNodeOfThisNode) {
  Environment env;
  set_slurm(env);
  env.set("SLURM_TASKS_PER_NODE", "3(x2),2").set("SLURM_NODEID", "2").set("SLURM_LOCALID", "0");
  EXPECT_EQ(rank_info_from_environment().local_world_size, 2);
  env.set("SLURM_NODEID", "0");
  EXPECT_EQ(rank_info_from_environment().local_world_size, 3);
  // SLURM_NTASKS_PER_NODE, when the user asked for it, wins.
  env.set("SLURM_NTASKS_PER_NODE", "2");
  EXPECT_EQ(rank_info_from_environment().local_world_size, 2);
}

TEST(Bootstrap, SlurmFirstHostOfTheNodeList) {
  Environment env;
  set_slurm(env);
  const std::pair<const char*, const char*> cases[] = {
      {"node[01-04,07]", "node01"}, {"gpu7,cpu[1-2]", "gpu7"}, {"rack[2-3]-n[005-006]", "rack2-n005"},
      {"single", "single"},         {"n[9],m[1-3]", "n9"},     {"x[10,3-4]", "x10"},
  };
  for (const auto& [list, first] : cases) {
    env.set("SLURM_JOB_NODELIST", list);
    EXPECT_EQ(rank_info_from_environment().master_addr, first) << list;
  }
  // The step's own node list, where task 0 runs, is preferred over the job's.
  env.set("SLURM_STEP_NODELIST", "step[3-4]");
  EXPECT_EQ(rank_info_from_environment().master_addr, "step3");
}

TEST(Bootstrap, SlurmStoreOverrides) {
  Environment env;
  set_slurm(env);
  env.set("H2_MASTER_ADDR", "login1").set("H2_MASTER_PORT", "40000");
  RankInfo info = rank_info_from_environment();
  EXPECT_EQ(info.master_addr, "login1");
  EXPECT_EQ(info.master_port, 40000);
}

TEST(Bootstrap, MalformedH2Values) {
  const std::pair<std::map<std::string, std::string>, std::string> cases[] = {
      {{{"H2_RANK", "x"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK='x' is not a number"},
      {{{"H2_RANK", "1x"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK='1x' is not a number"},
      {{{"H2_RANK", " 1"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK=' 1' is not a number"},
      {{{"H2_RANK", "99999999999999999999"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK='99999999999999999999' is out of range"},
      {{{"H2_RANK", "3000000000"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK='3000000000' is out of range"},
      {{{"H2_RANK", "-1"}, {"H2_WORLD_SIZE", "4"}}, "H2_RANK=-1 is below 0"},
      {{{"H2_RANK", "4"}, {"H2_WORLD_SIZE", "4"}, {"H2_MASTER_PORT", "1"}}, "H2_RANK=4 is not below H2_WORLD_SIZE=4"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "0"}}, "H2_WORLD_SIZE=0 is below 1"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "two"}}, "H2_WORLD_SIZE='two' is not a number"},
      {{{"H2_RANK", "0"}}, "H2_RANK is set but H2_WORLD_SIZE is not"},
      {{{"H2_WORLD_SIZE", "2"}}, "H2_WORLD_SIZE is set but H2_RANK is not"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}, {"H2_MASTER_PORT", "70000"}},
       "H2_MASTER_PORT=70000 is not a TCP port (0-65535)"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}, {"H2_MASTER_PORT", "port"}}, "H2_MASTER_PORT='port' is not a number"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}},
       "H2_WORLD_SIZE=2 but H2_MASTER_PORT is not set: the other ranks need to know the port of rank 0's rendezvous "
       "store"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}, {"H2_MASTER_PORT", "0"}},
       "H2_MASTER_PORT=0 with H2_WORLD_SIZE=2: the other ranks cannot find a port that rank 0 picks"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}, {"H2_MASTER_PORT", "1"}, {"H2_LOCAL_RANK", "0"}},
       "H2_LOCAL_RANK is set but H2_LOCAL_WORLD_SIZE is not"},
      {{{"H2_RANK", "0"}, {"H2_WORLD_SIZE", "2"}, {"H2_MASTER_PORT", "1"}, {"H2_LOCAL_WORLD_SIZE", "2"}},
       "H2_LOCAL_WORLD_SIZE is set but H2_LOCAL_RANK is not"},
      {{{"H2_RANK", "0"},
        {"H2_WORLD_SIZE", "2"},
        {"H2_MASTER_PORT", "1"},
        {"H2_LOCAL_RANK", "2"},
        {"H2_LOCAL_WORLD_SIZE", "2"}},
       "H2_LOCAL_RANK=2 is not below H2_LOCAL_WORLD_SIZE=2"},
      {{{"H2_RANK", "0"},
        {"H2_WORLD_SIZE", "2"},
        {"H2_MASTER_PORT", "1"},
        {"H2_LOCAL_RANK", "a"},
        {"H2_LOCAL_WORLD_SIZE", "2"}},
       "H2_LOCAL_RANK='a' is not a number"},
      {{{"H2_RANK", "0"},
        {"H2_WORLD_SIZE", "2"},
        {"H2_MASTER_PORT", "1"},
        {"H2_LOCAL_RANK", "0"},
        {"H2_LOCAL_WORLD_SIZE", "3"}},
       "H2_LOCAL_WORLD_SIZE=3 is larger than H2_WORLD_SIZE=2"},
      {{{"H2_MASTER_PORT", "-5"}}, "H2_MASTER_PORT=-5 is not a TCP port (0-65535)"},
  };
  for (const auto& [variables, message] : cases) {
    Environment env;
    for (const auto& [name, value] : variables) env.set(name.c_str(), value);
    EXPECT_EQ(error_of_environment(), message);
  }
}

TEST(Bootstrap, MalformedTorchrunValues) {
  const std::pair<std::map<std::string, std::string>, std::string> cases[] = {
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"WORLD_SIZE", "2"}}, "WORLD_SIZE is set but RANK is not"},
      {{{"RANK", "r"}, {"WORLD_SIZE", "2"}}, "RANK='r' is not a number"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}},
       "WORLD_SIZE=2 but MASTER_PORT is not set: the other ranks need to know the port of rank 0's rendezvous store"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65536"}}, "MASTER_PORT=65536 is not a TCP port (0-65535)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}, {"LOCAL_RANK", "0"}},
       "LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "1"}},
       "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}, {"H2_MASTER_PORT", "x"}},
       "H2_MASTER_PORT='x' is not a number"},
  };
  for (const auto& [variables, message] : cases) {
    Environment env;
    for (const auto& [name, value] : variables) env.set(name.c_str(), value);
    EXPECT_EQ(error_of_environment(), message);
  }
}

TEST(Bootstrap, MalformedSlurmValues) {
  const std::pair<std::map<std::string, std::string>, std::string> cases[] = {
      {{{"SLURM_NTASKS", ""}}, "SLURM_PROCID is set but SLURM_NTASKS is not"},
      {{{"SLURM_PROCID", "p"}}, "SLURM_PROCID='p' is not a number"},
      {{{"SLURM_PROCID", "8"}}, "SLURM_PROCID=8 is not below SLURM_NTASKS=8"},
      {{{"SLURM_NTASKS", "0"}}, "SLURM_NTASKS=0 is below 1"},
      {{{"SLURM_LOCALID", ""}}, "SLURM_PROCID is set but SLURM_LOCALID is not"},
      {{{"SLURM_LOCALID", "4"}}, "SLURM_LOCALID=4 is not below SLURM_TASKS_PER_NODE=4"},
      {{{"SLURM_TASKS_PER_NODE", ""}},
       "SLURM_PROCID is set but neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is"},
      {{{"SLURM_TASKS_PER_NODE", "4(2)"}}, "SLURM_TASKS_PER_NODE='4(2)' is not a list like '4(x2),3'"},
      {{{"SLURM_TASKS_PER_NODE", "4(x2"}}, "SLURM_TASKS_PER_NODE='4(x2' is not a list like '4(x2),3'"},
      {{{"SLURM_TASKS_PER_NODE", "4,,2"}}, "SLURM_TASKS_PER_NODE='4,,2' is not a list like '4(x2),3'"},
      {{{"SLURM_TASKS_PER_NODE", "four"}}, "SLURM_TASKS_PER_NODE='four' is not a list like '4(x2),3'"},
      {{{"SLURM_TASKS_PER_NODE", "4,2"}},
       "SLURM_TASKS_PER_NODE='4,2' differs between nodes but SLURM_NODEID is not set"},
      {{{"SLURM_TASKS_PER_NODE", "4,2"}, {"SLURM_NODEID", "2"}},
       "SLURM_NODEID=2 is not below the 2 nodes of SLURM_TASKS_PER_NODE='4,2'"},
      {{{"SLURM_NTASKS_PER_NODE", "16"}}, "SLURM_NTASKS_PER_NODE=16 is larger than SLURM_NTASKS=8"},
      {{{"SLURM_NTASKS_PER_NODE", "x"}}, "SLURM_NTASKS_PER_NODE='x' is not a number"},
      {{{"SLURM_JOB_NODELIST", "node[01-04"}},
       "SLURM_JOB_NODELIST='node[01-04' is not a Slurm host list: unmatched '['"},
      {{{"SLURM_JOB_NODELIST", "node]"}}, "SLURM_JOB_NODELIST='node]' is not a Slurm host list: unmatched ']'"},
      {{{"SLURM_JOB_NODELIST", "node[a-b]"}},
       "SLURM_JOB_NODELIST='node[a-b]' is not a Slurm host list: '[a-b]' is not a range of numbers"},
      {{{"SLURM_JOB_NODELIST", "n[1-]"}},
       "SLURM_JOB_NODELIST='n[1-]' is not a Slurm host list: '[1-]' is not a range of numbers"},
      {{{"SLURM_JOB_NODELIST", ",n1"}}, "SLURM_JOB_NODELIST=',n1' is not a Slurm host list: no host"},
      {{{"SLURM_JOB_NODELIST", ""}},
       "SLURM_PROCID is set but SLURM_JOB_NODELIST is not (set H2_MASTER_ADDR to rank 0's host)"},
      {{{"SLURM_JOB_ID", ""}},
       "SLURM_PROCID is set but SLURM_JOB_ID is not (set H2_MASTER_PORT to pick the store's port)"},
      {{{"SLURM_JOB_ID", "12a"}}, "SLURM_JOB_ID='12a' is not a number"},
      {{{"H2_MASTER_PORT", "99999"}}, "H2_MASTER_PORT=99999 is not a TCP port (0-65535)"},
      {{{"H2_MASTER_PORT", "0"}},
       "H2_MASTER_PORT=0 with SLURM_NTASKS=8: the other ranks cannot find a port that rank 0 picks"},
  };
  for (const auto& [variables, message] : cases) {
    Environment env;
    set_slurm(env);
    for (const auto& [name, value] : variables) env.set(name.c_str(), value);
    EXPECT_EQ(error_of_environment(), message);
  }
}

TEST(Bootstrap, IncompletePmix) {
  Environment env;
  env.set("PMIX_RANK", "0");
  EXPECT_EQ(error_of_environment(), "PMIX_RANK is set but PMIX_NAMESPACE is not");
}

// PMIx variables without a launcher behind them: PMIx_Init fails, and says so. (A real PMIx launch
// is tested by dicomm_pmix_store under mpirun.)
TEST(Bootstrap, PmixWithoutAServerFailsClearly) {
  Environment env;
  env.set("PMIX_RANK", "0").set("PMIX_NAMESPACE", "no-such-job");
  std::string message = error_of_environment();
  EXPECT_THAT(message, HasSubstr("PMIx_Init failed"));
  EXPECT_THAT(message, HasSubstr("no PMIx server"));
  // Slurm variables beside them do not hide the PMIx failure: PMIx takes precedence.
  set_slurm(env);
  EXPECT_THAT(error_of_environment(), HasSubstr("PMIx_Init failed"));
}

TEST(Bootstrap, SourceNames) {
  EXPECT_STREQ(launch_source_name(LaunchSource::single), "single process");
  EXPECT_STREQ(launch_source_name(LaunchSource::h2), "h2 launch");
  EXPECT_STREQ(launch_source_name(LaunchSource::torchrun), "torchrun");
  EXPECT_STREQ(launch_source_name(LaunchSource::slurm), "Slurm");
  EXPECT_STREQ(launch_source_name(LaunchSource::pmix), "PMIx");
}

}  // namespace
}  // namespace h2::dicomm
