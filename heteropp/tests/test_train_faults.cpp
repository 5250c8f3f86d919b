// `h2 train` stopped where it hurts: killed at every point of a checkpoint save (a fresh run, and a
// run resumed into the directory of the run it abandons, which used to leave `latest` naming a mix
// of both), and out of disk space at every stage of its output (a small tmpfs). Whatever is left
// either resumes into exactly the losses that a clean resume of one whole committed checkpoint gives,
// or is refused with a message; nothing crashes, and no temporary file survives the next run.
//
// The crash points come from crash_at.cpp, preloaded into the tool and its ranks: it counts each
// process's fsync, rename, unlink, mkdir ... calls and kills the chosen process before the chosen one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "h2/heteroauto/plan.hpp"
#include "plan_builder.hpp"

namespace h2::heteropp {
namespace {

namespace fs = std::filesystem;
using h2::test::env_or_fail;

// Runs a shell command line in a subshell, so that a tool killed by a signal is an exit code (128 +
// the signal) rather than a crash (run_h2 counts that as a failure); stdout and stderr together.
h2::test::CliResult run_tool_script(const std::string& line) {
  h2::test::CliResult run;
  const int status = h2::test::run_shell("(" + line + ")", run.output);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// `h2 ARGS` with environment assignments in front.
h2::test::CliResult run_tool(const std::string& args, const std::string& environment = "") {
  return run_tool_script(environment + " " + env_or_fail("H2_TOOL") + " " + args);
}

std::vector<nlohmann::json> metrics(const fs::path& out) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(out / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// What a checkpoint ROOT resolves to: the manifest's own hash ("xxh3"), or "" when it names none.
std::string checkpoint_identity(const fs::path& root) {
  std::ifstream latest(root / "latest");
  std::string name;
  if (!(latest >> name)) return "";
  std::ifstream manifest(root / name / "manifest.json");
  if (!manifest) return "";
  return nlohmann::json::parse(manifest).at("xxh3").get<std::string>();
}

// Temporary and partial entries anywhere under `dir`.
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> found;
  if (!fs::exists(dir)) return found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp") || name.ends_with(".partial")) found.push_back(entry.path().string());
  }
  return found;
}

// Every crash point of a run, from its H2_CRASH_LOG ("rank0 rename A -> B #1"), in order.
std::vector<std::string> crash_points(const fs::path& log) {
  std::vector<std::string> points;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) points.push_back(line);
  return points;
}

class TrainFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("h2-train-fault-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const nlohmann::json cluster = test::cpu_cluster_json("cpu-reference", 2);
    const nlohmann::json model = {{"name", "small"},   {"layers", 5},    {"hidden", 32},    {"ffn", 64},
                                  {"heads", 4},        {"kv_heads", 2},  {"seq_len", 16},   {"vocab", 256},
                                  {"global_batch", 4}, {"dtype", "f32"}, {"mlp", "swiglu"}, {"micro_batch_sizes", {2}}};
    std::ofstream(dir_ / "cluster.json") << cluster.dump(2);
    std::ofstream(dir_ / "model.json") << model.dump(2);
    // Two pipeline stages, so that both ranks write layer files and rank 0 commits after them.
    std::ofstream(dir_ / "plan.json")
        << heteroauto::to_json(test::make_plan(heteroauto::parse_model(model), 2, {{{{0, 2}, {2, 3}}, {2}}})).dump(2);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // `h2 train` on the suite's files: 6 steps, a checkpoint every 2, all three kept.
  static std::string train(const fs::path& out, const std::string& extra) {
    return "train --cluster " + (dir_ / "cluster.json").string() + " --model " + (dir_ / "model.json").string() +
           " --plan " + (dir_ / "plan.json").string() + " --out " + out.string() +
           " --steps 6 --warmup 1 --checkpoint-every 2 --keep-checkpoints 3 " + extra;
  }

  static void copy(const fs::path& from, const fs::path& to) {
    fs::remove_all(to);
    fs::copy(from, to, fs::copy_options::recursive);
  }

  // Runs `interrupted` (h2 arguments, with {OUT} for its output directory) on a fresh copy of
  // `start` (or an empty directory) once for every crash point it has, killed there; then resumes
  // what is left with `resume` (h2 arguments, {FROM} the checkpoint root, {OUT} a new directory).
  // `expected` maps each committed checkpoint's manifest hash to the losses that a clean resume of it
  // gives; every crash must leave one of them, or nothing (then the resume is refused by name).
  static void crash_everywhere(const std::string& name, const fs::path& start, const std::string& interrupted,
                               const std::string& resume, const std::map<std::string, std::vector<double>>& expected) {
    const auto with = [](std::string text, const std::string& key, const std::string& value) {
      for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
      return text;
    };
    const fs::path work = dir_ / (name + "-work"), log = dir_ / (name + "-crash-points.log");
    const std::string preload =
        "LD_PRELOAD=" + env_or_fail("H2_TEST_CRASH_PRELOAD") + " H2_CRASH_UNDER=" + work.string();
    start.empty() ? (fs::remove_all(work), void()) : copy(start, work);
    const h2::test::CliResult counted =
        run_tool(with(interrupted, "{OUT}", work.string()), preload + " H2_CRASH_LOG=" + log.string());
    ASSERT_EQ(counted.exit_code, 0) << counted.output;
    const auto points = crash_points(log);
    ASSERT_GT(points.size(), 20u) << "the crash points were not counted: is " << preload << " loaded?";
    std::map<std::string, int> outcomes;
    for (const std::string& point : points) {
      SCOPED_TRACE(name + ": killed before " + point);
      start.empty() ? (fs::remove_all(work), void()) : copy(start, work);
      const h2::test::CliResult crashed =
          run_tool(with(interrupted, "{OUT}", work.string()), preload + " H2_CRASH_AT='" + point + "'");
      if (crashed.exit_code == 0 && point.find(" mkdir ") != std::string::npos) {
        ++outcomes["not reached (another rank made the directory first)"];
        continue;
      }
      ASSERT_NE(crashed.exit_code, 0) << crashed.output;
      const std::string identity = checkpoint_identity(work / "checkpoints");
      const h2::test::CliResult after =
          run_tool(with(with(resume, "{FROM}", (work / "checkpoints").string()), "{OUT}", work.string()));
      if (identity.empty()) {
        EXPECT_NE(after.exit_code, 0) << after.output;
        EXPECT_NE(after.output.find("checkpoint"), std::string::npos) << after.output;
        ++outcomes["nothing committed: the resume is refused"];
        continue;
      }
      ASSERT_TRUE(expected.contains(identity)) << "latest names a checkpoint that no clean run wrote: " << identity;
      const std::vector<double>& want = expected.at(identity);
      if (want.empty()) {  // the last step: nothing to train
        EXPECT_EQ(after.exit_code, 2) << after.output;
        EXPECT_NE(after.output.find("nothing to train"), std::string::npos) << after.output;
      } else {
        ASSERT_EQ(after.exit_code, 0) << after.output;
        // metrics.jsonl: steps 1 to 6 once each, the last ones those of the clean resume.
        const std::vector<nlohmann::json> rows = metrics(work);
        ASSERT_EQ(rows.size(), 6u) << after.output;
        for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].at("step"), i + 1);
        for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(rows[6 - want.size() + i].at("loss"), want[i]) << i;
        EXPECT_EQ(leftovers(work / "checkpoints"), std::vector<std::string>());
      }
      ++outcomes["resumed from " + identity];
    }
    std::cout << name << ": " << points.size() << " crash points;";
    for (const auto& [outcome, count] : outcomes) std::cout << " " << count << " x " << outcome << ";";
    std::cout << "\n";
  }

  static inline fs::path dir_;
};

std::string step_name(int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", step);
  return name;
}

std::string manifest_hash(const fs::path& step_dir) {
  std::ifstream manifest(step_dir / "manifest.json");
  if (!manifest) throw std::runtime_error("no manifest in " + step_dir.string());
  return nlohmann::json::parse(manifest).at("xxh3");
}

std::vector<double> losses_of(const fs::path& out) {
  std::vector<double> losses;
  for (const nlohmann::json& row : metrics(out)) losses.push_back(row.at("loss"));
  return losses;
}

TEST_F(TrainFaultTest, AKilledSaveLeavesTheLastCommittedCheckpoint) {
  const fs::path clean = dir_ / "clean";
  ASSERT_EQ(run_tool(train(clean, "--lr 1e-2")).exit_code, 0);
  const std::vector<double> all = losses_of(clean);
  ASSERT_EQ(all.size(), 6u);
  std::map<std::string, std::vector<double>> expected;
  // A resume from step S continues with exactly the clean run's losses after S.
  for (int step : {2, 4, 6})
    expected[manifest_hash(clean / "checkpoints" / step_name(step))] =
        std::vector<double>(all.begin() + step, all.end());
  crash_everywhere("fresh", "", train("{OUT}", "--lr 1e-2"), train("{OUT}", "--lr 1e-2 --resume {FROM}"), expected);
}

// The case: a run resumed from step 2, with another learning rate, into the directory of the
// run that had committed steps 4 and 6, killed anywhere in its saves. Its step 4 used to be written
// into the committed step-000004, so that `latest` named one run's manifest with the other's layers.
TEST_F(TrainFaultTest, AKilledOverwriteNeverLeavesAMixOfTwoRuns) {
  const fs::path first = dir_ / "first", second = dir_ / "second";
  ASSERT_EQ(run_tool(train(first, "--lr 1e-2")).exit_code, 0);
  copy(first, second);
  const std::string resume_second = "--lr 5e-3 --resume " + (second / "checkpoints" / step_name(2)).string();
  ASSERT_EQ(run_tool(train(second, resume_second)).exit_code, 0);
  const std::vector<double> second_losses = losses_of(second);
  ASSERT_EQ(second_losses.size(), 6u);
  // The checkpoint names the second run's steps got, whatever they are: those not of the first run.
  std::map<int, fs::path> second_steps;
  for (const auto& entry : fs::directory_iterator(second / "checkpoints"))
    if (fs::exists(entry.path() / "manifest.json") &&
        manifest_hash(entry.path()) != manifest_hash(first / "checkpoints" / step_name(2)))
      second_steps[std::stoi(entry.path().filename().string().substr(5, 6))] = entry.path();
  ASSERT_EQ(second_steps.size(), 2u) << "the second run's steps 4 and 6";
  // What the resume after each crash (at --lr 5e-3) must give, for every checkpoint either run wrote:
  // the first run's step 4 resumed at the new rate is its own reference run.
  const fs::path from_first4 = dir_ / "from-first-4";
  copy(first, from_first4);
  ASSERT_EQ(run_tool(train(from_first4, "--lr 5e-3 --resume " + (from_first4 / "checkpoints" / step_name(4)).string()))
                .exit_code,
            0);
  const std::vector<double> first4 = losses_of(from_first4);
  std::map<std::string, std::vector<double>> expected = {
      {manifest_hash(first / "checkpoints" / step_name(2)), {second_losses.begin() + 2, second_losses.end()}},
      {manifest_hash(first / "checkpoints" / step_name(4)), {first4.begin() + 4, first4.end()}},
      {manifest_hash(first / "checkpoints" / step_name(6)), {}},
      {manifest_hash(second_steps.at(4)), {second_losses.begin() + 4, second_losses.end()}},
      {manifest_hash(second_steps.at(6)), {}},
  };
  crash_everywhere("overwrite", first, train("{OUT}", "--lr 5e-3 --resume {OUT}/checkpoints/" + step_name(2)),
                   train("{OUT}", "--lr 5e-3 --resume {FROM}"), expected);
}

// Out of disk space (a tmpfs of a fraction of what a whole run writes) at every stage of the run's
// output: the run stops with a message naming the file and the cause, leaves no temporary file, and
// whatever checkpoint it committed resumes.
TEST_F(TrainFaultTest, AFullDiskStopsTheRunByNameAndKeepsWhatItCommitted) {
  const fs::path clean = dir_ / "clean-for-space";
  ASSERT_EQ(run_tool(train(clean, "--lr 1e-2")).exit_code, 0);
  uintmax_t total = 0;  // in the tmpfs's pages
  for (const auto& entry : fs::recursive_directory_iterator(clean))
    if (entry.is_regular_file()) total += (entry.file_size() + 4095) / 4096 * 4096;
  const fs::path mount = dir_ / "small-disk", copy_out = dir_ / "small-disk-copy";
  fs::create_directories(mount);
  // A tmpfs in a mount namespace of our own (as root of a user namespace): no privileges needed.
  const std::string probe =
      "unshare --user --map-root-user --mount sh -c 'mount -t tmpfs -o size=64k tmpfs " + mount.string() + "' 2>&1";
  if (std::system(probe.c_str()) != 0) GTEST_SKIP() << "no mount namespace here (" << probe << ")";
  std::map<std::string, int> stopped_at;
  // Fractions of the whole; the last is one page short of it, so that the last files written fail.
  for (double fraction : {0.002, 0.2, 0.45, 0.7, 0.97, 1.0}) {
    const uintmax_t size =
        fraction == 1.0 ? total - 4096
                        : std::max<uintmax_t>(4096, static_cast<uintmax_t>(fraction * static_cast<double>(total)));
    SCOPED_TRACE("a disk of " + std::to_string(size) + " bytes of the " + std::to_string(total) + " a run writes");
    fs::remove_all(copy_out);
    fs::create_directories(copy_out);
    // The run, then a copy of what it left (the tmpfs vanishes with the namespace).
    const std::string script = "mount -t tmpfs -o size=" + std::to_string(size) + " tmpfs " + mount.string() + " && " +
                               env_or_fail("H2_TOOL") + " " + train(mount, "--lr 1e-2") + "; echo \"exit=$?\"; cp -a " +
                               mount.string() + "/. " + copy_out.string() + "/";
    const h2::test::CliResult run = run_tool_script("unshare --user --map-root-user --mount sh -c '" + script + "'");
    const size_t exit_at = run.output.rfind("exit=");
    ASSERT_NE(exit_at, std::string::npos) << run.output;
    EXPECT_EQ(std::stoi(run.output.substr(exit_at + 5)), 1) << run.output;
    const size_t cause = run.output.find("No space left on device");
    ASSERT_NE(cause, std::string::npos) << run.output;
    // The message names the file: the line with the cause holds a path on the small disk.
    const size_t line_start = run.output.rfind('\n', cause) + 1;
    const std::string line = run.output.substr(line_start, run.output.find('\n', cause) - line_start);
    EXPECT_NE(line.find(mount.string() + "/"), std::string::npos) << line;
    EXPECT_EQ(leftovers(copy_out), std::vector<std::string>()) << run.output;
    const std::string file = line.substr(line.find(mount.string()) + mount.string().size() + 1);
    ++stopped_at[file.substr(0, file.find(':'))];
    const std::string identity = checkpoint_identity(copy_out / "checkpoints");
    if (identity.empty()) continue;
    const h2::test::CliResult resumed =
        run_tool(train(copy_out, "--lr 1e-2 --resume " + (copy_out / "checkpoints").string()));
    if (identity == manifest_hash(clean / "checkpoints" / step_name(6))) {
      EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
      continue;
    }
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(losses_of(copy_out), losses_of(clean));
  }
  std::cout << "a full disk stopped the run at:";
  for (const auto& [where, count] : stopped_at)
    std::cout << " " << where << (count > 1 ? " (" + std::to_string(count) + "x)" : "") << ";";
  std::cout << "\n";
}

}  // namespace
}  // namespace h2::heteropp
