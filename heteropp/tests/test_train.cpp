// `h2 train` end to end, several processes over DiComm: a 3-stage uneven pipeline with 2 data-parallel
// replicas of different micro-batch counts, and two pipeline classes that split the layers
// differently, train the same model as one process; a run resumed from a checkpoint continues
// exactly, also under another plan; bad input gets a clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_test_support.hpp"
#include "plan_builder.hpp"

namespace h2::heteropp {
namespace {

namespace fs = std::filesystem;
using h2::test::run_h2;
using test::ClassSpec;
using test::make_plan;

constexpr int kSteps = 4;

class TrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("h2-train-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write(dir_ / "cluster.json", cluster_json("cpu-reference"));
    write(dir_ / "model.json", model_json());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static void write(const fs::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

  static nlohmann::json cluster_json(const std::string& plugin) {
    nlohmann::json type = {{"name", "cpu-ref"},
                           {"vendor", "H2"},
                           {"peak_tflops", {{"f32", 0.03}}},
                           {"memory_gib", 1},
                           {"runtime_overhead_gib", 0.1}};
    if (!plugin.empty()) type["plugin"] = plugin;
    return {{"name", "test"},
            {"device_types", {type}},
            {"nic_types", {{{"name", "lo"}, {"type", "ethernet"}, {"bandwidth_gbps", 10}}}},
            {"nodes",
             {{{"name", "cpu"},
               {"device_type", "cpu-ref"},
               {"count", 1},
               {"devices_per_node", 6},
               {"intra_node_bandwidth_gbps", 20},
               {"nic", "lo"}}}}};
  }

  static nlohmann::json model_json() {
    return {{"name", "small"}, {"layers", 5},    {"hidden", 32}, {"ffn", 64},          {"heads", 4},
            {"kv_heads", 2},   {"seq_len", 16},  {"vocab", 256}, {"global_batch", 10}, {"micro_batch_sizes", {2}},
            {"dtype", "f32"},  {"mlp", "swiglu"}};
  }

  static heteroauto::Model model() { return heteroauto::parse_model(model_json()); }

  // Writes the plan, trains, and returns each step's loss from metrics.jsonl.
  static std::vector<double> train(const std::string& name, const std::vector<ClassSpec>& classes,
                                   const std::string& extra = "") {
    const fs::path plan = dir_ / (name + "-plan.json");
    write(plan, heteroauto::to_json(make_plan(model(), 2, classes)));
    const fs::path out = dir_ / name;
    const auto result =
        run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " + (dir_ / "model.json").string() +
               " --plan " + plan.string() + " --out " + out.string() + " --steps " + std::to_string(kSteps) +
               " --warmup 1 --lr 1e-2 --checkpoint-every 2 " + extra);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::vector<double> losses;
    std::ifstream metrics(out / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
    return losses;
  }

  static inline fs::path dir_;
};

const std::vector<ClassSpec> kSingle = {{{{0, 5}}, {5}}};
// 3 uneven stages (1, 3 and 1 blocks), 2 replicas with 2 and 3 micro-batches.
const std::vector<ClassSpec> kPipeline = {{{{0, 1}, {1, 3}, {4, 1}}, {2, 3}}};
// Two classes whose stages hold different layers: every layer has its own set of holders. Two
// stages recompute their activations in backward.
const std::vector<ClassSpec> kMixed = {{{{0, 2}, {2, 3}}, {3}, {1}}, {{{0, 1}, {1, 3}, {4, 1}}, {2}, {0}}};

void expect_close(const std::vector<double>& a, const std::vector<double>& b, size_t from, const std::string& what) {
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps)) << what;
  ASSERT_EQ(b.size() + from, static_cast<size_t>(kSteps)) << what;
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_NEAR(a[from + i], b[i], 2e-5 * std::abs(a[from + i])) << what << ", step " << from + i + 1;
    worst = std::max(worst, std::abs(a[from + i] - b[i]) / std::abs(a[from + i]));
  }
  std::cout << what << ": losses " << ::testing::PrintToString(b) << ", largest relative difference from one process "
            << worst << "\n";
}

TEST_F(TrainTest, PipelinesAndReplicasTrainWhatOneProcessTrains) {
  const std::vector<double> single = train("single", kSingle);
  ASSERT_EQ(single.size(), static_cast<size_t>(kSteps));
  std::cout << "one process: losses " << ::testing::PrintToString(single) << "\n";
  EXPECT_NEAR(single[0], std::log(256.0), 0.3);
  EXPECT_LT(single.back(), single.front() - 0.2) << "the loss does not fall";

  const std::vector<double> pipeline = train("pipeline", kPipeline);
  expect_close(single, pipeline, 0, "3 uneven stages x 2 replicas (2 and 3 micro-batches), 1F1B");
  const std::vector<double> mixed = train("mixed", kMixed, "--schedule gpipe");
  expect_close(single, mixed, 0, "two classes with different layer splits, two stages recomputing, GPipe");

  // Resumed from the pipeline run's step-2 checkpoint: under the same plan exactly its numbers, under
  // another plan (other ranks hold other layers) the same model within fp32 tolerance.
  const std::string from = (dir_ / "pipeline" / "checkpoints" / "step-000002").string();
  const std::vector<double> resumed = train("resumed", kPipeline, "--resume " + from);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], pipeline[2]);
  EXPECT_EQ(resumed[1], pipeline[3]);
  expect_close(single, train("resumed-mixed", kMixed, "--resume " + from), 2, "resumed under another plan");

  // The timeline has every rank's forward, backward, transfers and allreduce.
  std::ifstream trace(dir_ / "pipeline" / "trace.json");
  const nlohmann::json events = nlohmann::json::parse(trace).at("traceEvents");
  std::set<std::string> names;
  std::set<int> pids;
  for (const nlohmann::json& e : events) {
    names.insert(e.at("name").get<std::string>().substr(0, e.at("name").get<std::string>().find(' ')));
    pids.insert(e.at("pid").get<int>());
  }
  EXPECT_EQ(pids.size(), 6u);
  for (const char* name : {"forward", "backward", "send", "recv", "allreduce", "optimizer", "checkpoint"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST_F(TrainTest, BadInputIsNamed) {
  const std::string base = "train --cluster " + (dir_ / "cluster.json").string() + " --model " +
                           (dir_ / "model.json").string() + " --out " + (dir_ / "bad").string();
  auto result = run_h2(base + " --schedule zigzag");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("--schedule"), std::string::npos) << result.output;

  heteroauto::Plan tp = make_plan(model(), 2, kSingle);
  tp.pipelines[0].stages[0].tp = 2;
  tp.pipelines[0].replicas[0].devices[0].push_back({"cpu", 0, 1, 1});
  write(dir_ / "tp-plan.json", heteroauto::to_json(tp));
  result = run_h2(base + " --plan " + (dir_ / "tp-plan.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("does not run tensor parallelism"), std::string::npos) << result.output;

  write(dir_ / "no-plugin.json", cluster_json(""));
  write(dir_ / "single-plan.json", heteroauto::to_json(make_plan(model(), 2, kSingle)));
  result = run_h2("train --cluster " + (dir_ / "no-plugin.json").string() + " --model " +
                  (dir_ / "model.json").string() + " --plan " + (dir_ / "single-plan.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("has no \"plugin\""), std::string::npos) << result.output;

  // A checkpoint of another architecture.
  nlohmann::json wider = model_json();
  wider["hidden"] = 64;
  write(dir_ / "wider.json", wider);
  ASSERT_EQ(run_h2(base + " --plan " + (dir_ / "single-plan.json").string() + " --steps 1").exit_code, 0);
  heteroauto::Model wide = heteroauto::parse_model(wider);
  write(dir_ / "wide-plan.json", heteroauto::to_json(make_plan(wide, 2, kSingle)));
  result = run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " + (dir_ / "wider.json").string() +
                  " --plan " + (dir_ / "wide-plan.json").string() + " --out " + (dir_ / "bad2").string() +
                  " --resume " + (dir_ / "bad" / "checkpoints").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("of another model: its hidden is 32, this model's is 64"), std::string::npos)
      << result.output;
}

// `h2 profile` times a layer, the embedding, the head and the optimizer on every device and writes
// them where the planner reads them; the planner then says its costs are measured.
TEST_F(TrainTest, ProfileWritesMeasuredProfiles) {
  const fs::path out = dir_ / "profiled.json";
  auto result = run_h2("profile --cluster " + (dir_ / "cluster.json").string() + " --model " +
                       (dir_ / "model.json").string() + " --iterations 2 --warmup 1 -o " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(out);
  const nlohmann::json profiled = nlohmann::json::parse(in);
  const heteroauto::Model model = heteroauto::load_model((dir_ / "model.json").string());
  const nlohmann::json& measured = profiled.at("device_types").at(0).at("measured").at(model.name);
  for (const char* part : {"layer", "embedding", "head"}) {
    ASSERT_EQ(measured.at(part).size(), model.micro_batch_sizes.size()) << part;
    for (size_t i = 0; i < model.micro_batch_sizes.size(); ++i) {
      EXPECT_EQ(measured.at(part).at(i).at("micro_batch"), model.micro_batch_sizes[i]);
      EXPECT_GT(measured.at(part).at(i).at("forward_ms").get<double>(), 0);
      EXPECT_GT(measured.at(part).at(i).at("backward_ms").get<double>(), 0);
    }
  }
  EXPECT_GT(measured.at("optimizer_ns_per_parameter").get<double>(), 0);
  EXPECT_NO_THROW(heteroauto::parse_cluster(profiled));
  result = run_h2("plan --cluster " + out.string() + " --model " + (dir_ / "model.json").string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("measured (h2 profile)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("+ optimizer"), std::string::npos) << result.output;

  write(dir_ / "no-plugin.json", cluster_json(""));
  result =
      run_h2("profile --cluster " + (dir_ / "no-plugin.json").string() + " --model " + (dir_ / "model.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("no device type names a \"plugin\""), std::string::npos) << result.output;
}

}  // namespace
}  // namespace h2::heteropp
