// `h2 train` end to end, several processes over DiComm: a 3-stage uneven pipeline with 2 data-parallel
// replicas of different micro-batch counts, two pipeline classes that split the layers differently,
// and stages on the Ascend and MLU plugins (over their emulated runtimes) train the same model as one
// process; a run resumed from a checkpoint continues
// exactly, also under another plan; an f16 model skips the steps whose loss-scaled gradients
// overflow; bad input gets a clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli_test_support.hpp"
#include "h2/h2.hpp"
#include "h2/heteropp/checkpoint.hpp"
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

  static nlohmann::json cluster_json(const std::string& plugin) { return test::cpu_cluster_json(plugin, 6); }

  static nlohmann::json model_json(const std::string& dtype = "f32") {
    return {{"name", "small"}, {"layers", 5},    {"hidden", 32}, {"ffn", 64},          {"heads", 4},
            {"kv_heads", 2},   {"seq_len", 16},  {"vocab", 256}, {"global_batch", 10}, {"micro_batch_sizes", {2}},
            {"dtype", dtype},  {"mlp", "swiglu"}};
  }

  static heteroauto::Model model(const std::string& dtype = "f32") {
    return heteroauto::parse_model(model_json(dtype));
  }

  // Writes the plan, trains, and returns each step's metrics from metrics.jsonl.
  static std::vector<nlohmann::json> train_metrics(const std::string& name, const std::vector<ClassSpec>& classes,
                                                   const std::string& extra = "", const std::string& dtype = "f32",
                                                   int steps = kSteps) {
    const fs::path plan = dir_ / (name + "-plan.json"), model_file = dir_ / ("model-" + dtype + ".json");
    write(model_file, model_json(dtype));
    write(plan, heteroauto::to_json(make_plan(model(dtype), 2, classes)));
    const fs::path out = dir_ / name;
    const auto result = run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " +
                               model_file.string() + " --plan " + plan.string() + " --out " + out.string() +
                               " --steps " + std::to_string(steps) + " --warmup 1 --lr 1e-2 " + extra);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::vector<nlohmann::json> steps_done;
    std::ifstream metrics(out / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) steps_done.push_back(nlohmann::json::parse(line));
    return steps_done;
  }

  // The bytes per element of the run's gathers of updated weights (the distributed optimizer's), from its trace.
  static double weight_gather_bytes_per_element(const std::string& name) {
    std::ifstream file(dir_ / name / "trace.json");
    const nlohmann::json trace = nlohmann::json::parse(file);
    double bytes = 0, elements = 0;
    for (const nlohmann::json& e : trace.at("traceEvents"))
      if (e.at("name") == "allgather weights") {
        bytes += e.at("args").at("bytes").get<double>();
        elements += e.at("args").at("elements").get<double>();
      }
    EXPECT_GT(elements, 0) << name << " gathered no weights";
    return elements > 0 ? bytes / elements : 0;
  }

  // Each step's loss.
  static std::vector<double> train(const std::string& name, const std::vector<ClassSpec>& classes,
                                   const std::string& extra = "") {
    std::vector<double> losses;
    for (const nlohmann::json& step : train_metrics(name, classes, "--checkpoint-every 2 " + extra))
      losses.push_back(step.at("loss"));
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

// Tensor parallelism: a 2-way stage (recomputing) feeding a whole one, 2 replicas; and a whole stage
// feeding a 2-way last stage.
const std::vector<ClassSpec> kTensorParallel = {{{{0, 2}, {2, 3}}, {2, 3}, {0}, {2, 1}}};
const std::vector<ClassSpec> kTensorParallelLast = {{{{0, 3}, {3, 2}}, {5}, {}, {1, 2}}};
// Asymmetric tensor parallelism (HexiScale): blocks 0-1 and the embedding are held 2-way in one class
// and whole in the other, blocks 2-4 and the head 2-way in both.
const std::vector<ClassSpec> kAsymmetric = {{{{0, 5}}, {2}, {}, {2}}, {{{0, 2}, {2, 3}}, {3}, {}, {1, 2}}};

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

// Gradient sums start while the step's last backward pass runs (one bucket per layer here), on the
// rank's gradient thread; they change no loss, the trace shows them beside the backward pass, and
// summary.json reports the exposed time. 16-bit messages train the same model within bf16's rounding.
TEST_F(TrainTest, GradientSumsOverlapTheLastBackwardPassAndChangeNoLoss) {
  const std::vector<ClassSpec> replicas = {{{{0, 5}}, {3, 2}}};
  const std::vector<double> after = train("sums-after", replicas, "--overlap-grad-reduce off");
  const std::vector<double> overlapped = train("sums-overlapped", replicas, "--grad-bucket 1K");
  EXPECT_EQ(after, overlapped) << "overlap must not change a bit";
  expect_close(train("single", kSingle), overlapped, 0, "2 replicas, sums overlapped");

  std::ifstream trace(dir_ / "sums-overlapped" / "trace.json");
  std::map<int, std::vector<std::pair<double, double>>> backward;  // pid -> [start, end)
  std::vector<nlohmann::json> sums;
  const nlohmann::json events = nlohmann::json::parse(trace).at("traceEvents");  // kept: the loop reads it
  for (const nlohmann::json& e : events) {
    if (e.at("ph") != "X") continue;
    const std::string name = e.at("name");
    if (name.starts_with("backward"))
      backward[e.at("pid").get<int>()].emplace_back(e.at("ts").get<double>(),
                                                    e.at("ts").get<double>() + e.at("dur").get<double>());
    if (name == "allreduce gradients") sums.push_back(e);
  }
  ASSERT_FALSE(sums.empty());
  int beside_backward = 0;
  for (const nlohmann::json& sum : sums) {
    EXPECT_EQ(sum.at("tid"), 1) << "sums run on the gradient thread's row";
    for (auto [start, end] : backward[sum.at("pid").get<int>()])
      beside_backward += start <= sum.at("ts").get<double>() && sum.at("ts").get<double>() < end;
  }
  std::cout << beside_backward << " of " << sums.size() << " gradient sums began during a backward pass\n";
  EXPECT_GT(beside_backward, 0) << "no gradient sum overlapped a backward pass";

  std::ifstream summary_file(dir_ / "sums-overlapped" / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(summary_file);
  EXPECT_GE(summary.at("exposed_comm_s").get<double>(), 0);
  EXPECT_GT(summary.at("gradient_comm_s").get<double>(), 0);
  for (const nlohmann::json& rank : summary.at("ranks")) EXPECT_TRUE(rank.contains("exposed_comm_s"));

  const std::vector<double> bf16 = train("sums-bf16", replicas, "--grad-comm-dtype bf16");
  ASSERT_EQ(bf16.size(), after.size());
  for (size_t i = 0; i < bf16.size(); ++i) EXPECT_NEAR(bf16[i], after[i], 1e-2 * after[i]) << "step " << i + 1;

  for (const char* bad :
       {"--grad-comm-dtype f64", "--grad-bucket 0", "--grad-bucket lots", "--overlap-grad-reduce maybe"}) {
    const auto result = run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " +
                               (dir_ / "model.json").string() + " " + bad);
    EXPECT_NE(result.exit_code, 0) << bad;
    EXPECT_NE(result.output.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos)
        << bad << ": " << result.output;
  }
}

// ZeRO-1: with --distributed-optimizer every rank keeps AdamW's moments for its share of each layer it
// holds (1 / the layer's holders), also when replicas cut the layer with different degrees; the
// model trained is the same, and checkpoints move between sharded and unsharded runs.
TEST_F(TrainTest, DistributedOptimizerShardsAdamWOverReplicasAndTrainsTheSameModel) {
  const std::vector<double> single = train("single", kSingle);
  const std::vector<ClassSpec> replicas = {{{{0, 5}}, {3, 2}}};
  const std::vector<nlohmann::json> plain = train_metrics("zero-plain", replicas, "--checkpoint-every 2");
  const std::vector<nlohmann::json> sharded =
      train_metrics("zero-sharded", replicas, "--checkpoint-every 2 --distributed-optimizer");
  ASSERT_EQ(plain.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(sharded.size(), static_cast<size_t>(kSteps));
  std::vector<double> losses;
  for (size_t i = 0; i < plain.size(); ++i) {
    // The same arithmetic but for the global norm, summed in other pieces (the clip factor's last bits).
    EXPECT_NEAR(sharded[i].at("loss").get<double>(), plain[i].at("loss").get<double>(),
                1e-6 * plain[i].at("loss").get<double>())
        << "step " << i + 1;
    losses.push_back(sharded[i].at("loss"));
    for (size_t r = 0; r < 2; ++r) {
      const double whole = plain[i].at("ranks")[r].at("optimizer_state_bytes");
      const double share = sharded[i].at("ranks")[r].at("optimizer_state_bytes");
      EXPECT_NEAR(share, whole / 2, 0.1 * whole / 2) << "rank " << r << " keeps half of AdamW's state";
    }
  }
  expect_close(single, losses, 0, "2 replicas, distributed optimizer");

  // A bf16 model: the f32 masters of its 16-bit matrices are sharded too (no rank keeps them whole).
  const std::vector<nlohmann::json> plain16 = train_metrics("zero-plain-bf16", replicas, "", "bf16");
  const std::vector<nlohmann::json> sharded16 =
      train_metrics("zero-sharded-bf16", replicas, "--distributed-optimizer", "bf16");
  ASSERT_EQ(plain16.size(), sharded16.size());
  for (size_t i = 0; i < plain16.size(); ++i) {
    EXPECT_NEAR(sharded16[i].at("loss").get<double>(), plain16[i].at("loss").get<double>(),
                1e-5 * plain16[i].at("loss").get<double>())
        << "bf16, step " << i + 1;
    const double whole = plain16[i].at("ranks")[0].at("optimizer_state_bytes");
    const double share = sharded16[i].at("ranks")[0].at("optimizer_state_bytes");
    EXPECT_NEAR(share, whole / 2, 0.1 * whole / 2) << "bf16: masters and moments halve";
  }
  // Each rank rounds its own updated slice into bf16 before the gather: half the bytes of gathering
  // f32 (only the rank-1 f32 parameters, the norms' weights, travel as f32), the same weights.
  EXPECT_NEAR(weight_gather_bytes_per_element("zero-sharded-bf16"), 2.0, 0.1);
  EXPECT_EQ(weight_gather_bytes_per_element("zero-sharded"), 4.0);
  // Also where replicas cut a layer with different degrees (strided pieces in the slices).
  const std::vector<nlohmann::json> asymmetric16 = train_metrics("asymmetric-bf16", kAsymmetric, "", "bf16");
  const std::vector<nlohmann::json> sharded_asymmetric16 =
      train_metrics("zero-asymmetric-bf16", kAsymmetric, "--distributed-optimizer", "bf16");
  ASSERT_EQ(asymmetric16.size(), sharded_asymmetric16.size());
  for (size_t i = 0; i < asymmetric16.size(); ++i)
    EXPECT_NEAR(sharded_asymmetric16[i].at("loss").get<double>(), asymmetric16[i].at("loss").get<double>(),
                1e-5 * asymmetric16[i].at("loss").get<double>())
        << "bf16, degrees 1 and 2, step " << i + 1;
  expect_close(single, train("zero-pipeline", kPipeline, "--distributed-optimizer"), 0,
               "3 uneven stages x 2 replicas, distributed optimizer");
  expect_close(single, train("zero-asymmetric", kAsymmetric, "--distributed-optimizer"), 0,
               "replicas of degrees 1 and 2, distributed optimizer");

  // A plan made for it (h2 plan --distributed-optimizer) turns it on by itself.
  heteroauto::Plan made_for_it = make_plan(model(), 2, replicas);
  made_for_it.distributed_optimizer = true;
  write(dir_ / "zero-plan.json", heteroauto::to_json(made_for_it));
  const auto planned = run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " +
                              (dir_ / "model.json").string() + " --plan " + (dir_ / "zero-plan.json").string() +
                              " --out " + (dir_ / "zero-planned").string() + " --steps 1");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("was made for the distributed optimizer: training with it"), std::string::npos)
      << planned.output;
  std::ifstream planned_summary(dir_ / "zero-planned" / "summary.json");
  EXPECT_EQ(nlohmann::json::parse(planned_summary).at("ranks")[0].at("optimizer_state_bytes"),
            sharded[0].at("ranks")[0].at("optimizer_state_bytes"));
  // ... and --no-distributed-optimizer refuses it by name rather than run a plan whose memory may need it.
  const auto refused =
      run_h2("train --no-distributed-optimizer --cluster " + (dir_ / "cluster.json").string() + " --model " +
             (dir_ / "model.json").string() + " --plan " + (dir_ / "zero-plan.json").string() + " --out " +
             (dir_ / "zero-refused").string() + " --steps 1");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("was made for the distributed optimizer"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--no-distributed-optimizer"), std::string::npos) << refused.output;

  // A sharded run's checkpoint resumes unsharded under another plan, and an unsharded one sharded.
  const std::string sharded_step2 = (dir_ / "zero-sharded" / "checkpoints" / "step-000002").string();
  expect_close(single, train("zero-resumed-plain", kPipeline, "--resume " + sharded_step2), 2,
               "sharded checkpoint resumed unsharded on a pipeline");
  const std::string plain_step2 = (dir_ / "zero-plain" / "checkpoints" / "step-000002").string();
  expect_close(single, train("zero-resumed-sharded", kAsymmetric, "--distributed-optimizer --resume " + plain_step2), 2,
               "unsharded checkpoint resumed sharded over asymmetric replicas");
}

// A pipeline whose second stage runs on the Ascend plugin (over the emulated CANN runtime) trains
// what one cpu-reference process trains: the vendor plugin's operators, memory and streams carry a
// real job, with activations and gradients crossing plugins through DiComm.
TEST_F(TrainTest, AStageOnTheEmulatedAscendPluginTrainsWhatOneProcessTrains) {
  nlohmann::json cluster = cluster_json("cpu-reference");
  cluster["nodes"][0]["devices_per_node"] = 1;
  nlohmann::json ascend_type = cluster["device_types"][0];
  ascend_type["name"] = "ascend-emulated";
  ascend_type["vendor"] = "Huawei";
  ascend_type["plugin"] = "ascend";
  cluster["device_types"].push_back(ascend_type);
  // The description counts on device-direct transfers that DiComm stages for the emulated Ascend's
  // memory (not host memory, no NIC access) and does for cpu-reference's (host memory): h2 train
  // says which, and trains.
  // (On an RDMA NIC: over plain Ethernet the plan stages every transfer anyway.)
  cluster["device_direct_rdma"] = nlohmann::json::array({{"Huawei", "Huawei"}, {"H2", "H2"}});
  cluster["nic_types"][0]["type"] = "infiniband";
  nlohmann::json ascend_group = cluster["nodes"][0];
  ascend_group["name"] = "ascend";
  ascend_group["device_type"] = "ascend-emulated";
  cluster["nodes"].push_back(ascend_group);
  write(dir_ / "cluster-cpu-ascend.json", cluster);

  heteroauto::Plan plan = make_plan(model(), 2, {{{{0, 3}, {3, 2}}, {5}}});
  heteroauto::PlanStage& second = plan.pipelines[0].stages[1];
  second.node_group = "ascend";
  second.device_type = "ascend-emulated";
  plan.pipelines[0].replicas[0].devices[1] = {{"ascend", 0, 0, 1}};
  const fs::path plan_file = dir_ / "cpu-ascend-plan.json";
  write(plan_file, heteroauto::to_json(plan));
  const fs::path out = dir_ / "cpu-ascend";
  const auto result = run_h2("train --cluster " + (dir_ / "cluster-cpu-ascend.json").string() + " --model " +
                             (dir_ / "model.json").string() + " --plan " + plan_file.string() + " --out " +
                             out.string() + " --steps " + std::to_string(kSteps) + " --warmup 1 --lr 1e-2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("ascend:0"), std::string::npos) << result.output;
  for (const char* warning : {"h2 train: warning: device_direct_rdma pairs Huawei with Huawei, but plugin ascend's "
                              "memory is staged through pinned host memory",
                              "h2 train: warning: device_direct_rdma pairs (and so the collectives of) Huawei, but "
                              "plugin ascend's sums between nodes run on DiComm's own algorithms"})
    EXPECT_NE(result.output.find(warning), std::string::npos) << warning << " missing:\n" << result.output;
  EXPECT_EQ(result.output.find("pairs H2 with"), std::string::npos) << result.output;
  std::vector<double> losses;
  std::ifstream metrics(out / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  expect_close(train("cpu-only", kSingle), losses, 0, "stage 0 on cpu-reference, stage 1 on the emulated Ascend");
}

// Three vendors in one job: a cluster of a cpu-reference, an emulated Ascend and an emulated MLU
// device, none of which holds the model alone, on which HeteroAuto itself (no hand-made plan) puts a
// pipeline stage on each plugin; it trains what one cpu-reference process trains.
TEST_F(TrainTest, HeteroAutoPlacesAStageOnEachOfThreeVendorsAndTheyTrainWhatOneProcessTrains) {
  nlohmann::json cluster = cluster_json("");
  const nlohmann::json base_type = cluster["device_types"][0], base_group = cluster["nodes"][0];
  cluster["device_types"] = nlohmann::json::array();
  cluster["nodes"] = nlohmann::json::array();
  for (const auto& [group, plugin] : {std::pair{"cpu", "cpu-reference"}, {"ascend", "ascend"}, {"mlu", "mlu"}}) {
    nlohmann::json type = base_type;
    type["name"] = std::string(plugin) + "-type";
    type["plugin"] = plugin;
    type["memory_gib"] = 0.1008;  // 0.1 of runtime overhead, and room for about a third of the model
    cluster["device_types"].push_back(type);
    nlohmann::json node = base_group;
    node["name"] = group;
    node["device_type"] = type["name"];
    node["devices_per_node"] = 1;
    cluster["nodes"].push_back(node);
  }
  write(dir_ / "cluster-three-vendors.json", cluster);
  const fs::path out = dir_ / "three-vendors";
  const auto result = run_h2("train --cluster " + (dir_ / "cluster-three-vendors.json").string() + " --model " +
                             (dir_ / "model.json").string() + " --out " + out.string() + " --steps " +
                             std::to_string(kSteps) + " --warmup 1 --lr 1e-2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* device : {"cpu-reference:0", "ascend:0", "mlu:0"})
    EXPECT_NE(result.output.find(device), std::string::npos) << device << " has no stage:\n" << result.output;
  std::vector<double> losses;
  std::ifstream metrics(out / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  expect_close(train("cpu-only", kSingle), losses, 0, "HeteroAuto's stages on cpu-reference, Ascend and MLU");
}

// Stages cut over tensor-parallel groups train what one process trains; their checkpoints hold whole
// layers, so a run resumes under a plan with other degrees.
TEST_F(TrainTest, TensorParallelStagesTrainWhatOneProcessTrains) {
  const std::vector<double> single = train("tp-single", kSingle);
  expect_close(single, train("tp", kTensorParallel), 0,
               "2-way tensor-parallel stage (recomputing) + whole stage, 2 replicas (2 and 3 micro-batches)");
  expect_close(single, train("tp-last", kTensorParallelLast), 0, "whole stage + 2-way tensor-parallel last stage");
  std::ifstream trace(dir_ / "tp" / "trace.json");
  const nlohmann::json events = nlohmann::json::parse(trace).at("traceEvents");  // kept: the loop reads it
  int tp_sums = 0;
  for (const nlohmann::json& e : events) tp_sums += e.value("name", std::string()) == "allreduce tensor-parallel";
  // Stage 0 of each replica has 2 ranks; the replicas run 5 micro-batches in all; 2 blocks, each with 2
  // sums in forward, 2 in backward and 2 in the recomputed forward.
  EXPECT_EQ(tp_sums, 2 * 5 * 2 * 6 * kSteps);
  const std::string from = (dir_ / "tp" / "checkpoints" / "step-000002").string();
  expect_close(single, train("tp-resumed", kTensorParallelLast, "--resume " + from), 2,
               "resumed from the 2-way plan's checkpoint under another cut");
  expect_close(single,
               train("tp-from-whole", kTensorParallel,
                     "--resume " + (dir_ / "tp-single" / "checkpoints" / "step-000002").string()),
               2, "resumed from the one-process checkpoint under the 2-way plan");
}

TEST_F(TrainTest, ReplicasThatCutALayerWithDifferentDegreesTrainWhatOneProcessTrains) {
  const std::vector<double> single = train("asym-single", kSingle);
  expect_close(single, train("asym", kAsymmetric), 0, "a layer 2-way in one class and whole in the other");
  const std::string from = (dir_ / "asym" / "checkpoints" / "step-000002").string();
  expect_close(single, train("asym-resumed", kSingle, "--resume " + from), 2,
               "one process resumed from the asymmetric plan's checkpoint");
}

// h2 plan -o writes what h2 train --plan runs, on every example cluster whose devices run here (each
// device type names a plugin: local, cpu-and-ascend, three-vendors), with gpt-tiny; the first step's
// loss is one device's on all of them. The embedded default (local) is a tensor-parallel stage in one
// pipeline class next to another class, and its trace shows the pipeline's messages and the sums.
TEST_F(TrainTest, PlanFilesOfTheRunnableExampleClustersTrainWhatOneDeviceTrains) {
  const fs::path examples = fs::path(h2::test::env_or_fail("H2_SOURCE_ROOT")) / "examples";
  const std::string model = (examples / "models" / "gpt-tiny.json").string();
  auto first_loss = [](const fs::path& out) {
    std::ifstream metrics(out / "metrics.jsonl");
    std::string line;
    return std::getline(metrics, line) ? nlohmann::json::parse(line).at("loss").get<double>() : -1.0;
  };
  write(dir_ / "one-device.json", test::cpu_cluster_json("cpu-reference", 1));
  write(dir_ / "one-device-plan.json",
        heteroauto::to_json(make_plan(heteroauto::load_model(model), 1, {{{{0, 6}}, {16}}})));
  auto result = run_h2("train --cluster " + (dir_ / "one-device.json").string() + " --model " + model + " --plan " +
                       (dir_ / "one-device-plan.json").string() + " --steps 1 --out " + (dir_ / "one-device").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const double single = first_loss(dir_ / "one-device");
  for (const char* name : {"local", "cpu-and-ascend", "three-vendors"}) {
    const std::string cluster = (examples / "clusters" / (std::string(name) + ".json")).string();
    const fs::path plan = dir_ / (std::string(name) + "-best.json"), out = dir_ / (std::string(name) + "-round-trip");
    result = run_h2("plan --cluster " + cluster + " --model " + model + " -o " + plan.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    result = run_h2("train --cluster " + cluster + " --model " + model + " --plan " + plan.string() +
                    " --steps 1 --out " + out.string());
    ASSERT_EQ(result.exit_code, 0) << name << ":\n" << result.output;
    EXPECT_NEAR(first_loss(out), single, 2e-5 * single) << name;
    if (std::string(name) != "local") continue;
    const heteroauto::Plan best = heteroauto::load_plan(plan.string());
    ASSERT_EQ(best.pipelines.size(), 2u) << "the default cluster's plan changed:\n" << result.output;
    std::set<std::string> events;
    const nlohmann::json trace = nlohmann::json::parse(std::ifstream(out / "trace.json"));
    for (const nlohmann::json& e : trace["traceEvents"]) events.insert(e.value("name", std::string()));
    std::vector<std::string> expected = {"send activations", "recv activations", "send gradients", "recv gradients",
                                         "allreduce tensor-parallel"};
    // Its sums: reduce-scatters and a gather of the weights where the plan takes the distributed optimizer.
    if (best.distributed_optimizer)
      expected.insert(expected.end(), {"reduce-scatter gradients", "allgather weights"});
    else
      expected.emplace_back("allreduce gradients");
    for (const std::string& event : expected)
      EXPECT_TRUE(events.count(event)) << "no '" << event << "' in the main job's trace";
  }
  // At micro-batch 4 the 128 MiB device holds gpt-tiny alone only with its AdamW state sharded over
  // the other replicas too (a class that fits only beside others): the plan makes it a replica of its
  // own, and the job trains what one device trains.
  nlohmann::json by_fours = nlohmann::json::parse(std::ifstream(model));
  by_fours["micro_batch_sizes"] = {4};
  write(dir_ / "gpt-tiny-by-fours.json", by_fours);
  const std::string local = (examples / "clusters" / "local.json").string(),
                    by_fours_model = (dir_ / "gpt-tiny-by-fours.json").string();
  const fs::path plan = dir_ / "leaning.json", out = dir_ / "leaning";
  result =
      run_h2("plan --distributed-optimizer --cluster " + local + " --model " + by_fours_model + " -o " + plan.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const heteroauto::Plan leaning = heteroauto::load_plan(plan.string());
  EXPECT_TRUE(std::ranges::any_of(leaning.pipelines, [](const heteroauto::PlanPipeline& pipeline) {
    return pipeline.stages.size() == 1 && pipeline.stages[0].node_group == "local-128mib";
  })) << result.output;
  result = run_h2("train --cluster " + local + " --model " + by_fours_model + " --plan " + plan.string() +
                  " --steps 1 --out " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NEAR(first_loss(out), single, 2e-5 * single);
}

TEST_F(TrainTest, BadInputIsNamed) {
  const std::string base = "train --cluster " + (dir_ / "cluster.json").string() + " --model " +
                           (dir_ / "model.json").string() + " --out " + (dir_ / "bad").string();
  auto result = run_h2(base + " --schedule zigzag");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("--schedule"), std::string::npos) << result.output;

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

  // Issue 26's CLI cases, each of which used to train or fail late with another message.
  result = run_h2("train --cluster " + (dir_ / "cluster.json").string() + " --model " + (dir_ / "wider.json").string() +
                  " --plan " + (dir_ / "single-plan.json").string() + " --out " + (dir_ / "bad3").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("was made for another model than --model " + (dir_ / "wider.json").string() +
                               " (hidden 32 there, 64 here)"),
            std::string::npos)
      << result.output;
  for (const char* option : {"--clip", "--min-lr", "--lr", "--weight-decay"}) {
    result = run_h2(base + " " + option + " nan");
    EXPECT_NE(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("'nan' is not a finite number"), std::string::npos) << option << result.output;
  }
  result = run_h2(base + " --plan " + (dir_ / "single-plan.json").string() + " --steps 1 --data /dev/zero");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("training data /dev/zero: not a regular file"), std::string::npos) << result.output;
  result = run_h2(base + " --plan " + (dir_ / "single-plan.json").string() + " --steps 1 --resume " +
                  (dir_ / "bad" / "checkpoints").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("is at step 1 and --steps is 1: nothing to train"), std::string::npos) << result.output;

  // The job file the driver wrote for its ranks: whole, it is what they ran with; with another option,
  // or with a field of the wrong kind, it is refused by name.
  const fs::path job = dir_ / "bad" / "job.json";
  std::ifstream job_file(job);
  nlohmann::json written = nlohmann::json::parse(job_file);
  EXPECT_EQ(written.at("format"), "h2-train-job");
  EXPECT_EQ(written.at("plan"), (dir_ / "bad" / "plan.json").string());
  EXPECT_EQ(written.at("steps"), 1);
  EXPECT_TRUE(written.at("plugin_options").contains("cpu-reference")) << written.dump();
  result = run_h2("train --job " + job.string() + " --steps 3");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--steps cannot be given with it"), std::string::npos) << result.output;
  written["steps"] = 2.5;  // not a whole number: refused, not read as 2
  write(dir_ / "bad-job.json", written);
  result = run_h2("train --job " + (dir_ / "bad-job.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("\"steps\" is 2.5; it must be a whole number in [1, "), std::string::npos)
      << result.output;
  written["steps"] = 1;
  written["schedule"] = "zigzag";
  write(dir_ / "bad-job.json", written);
  result = run_h2("train --job " + (dir_ / "bad-job.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("\"schedule\" is \"zigzag\"; it must be one of 1f1b, gpipe"), std::string::npos)
      << result.output;
  result = run_h2("train --steps 3");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--cluster is required (or --job FILE)"), std::string::npos) << result.output;
}

// An f16 model trains through the 3-stage pipeline with f32 master weights and dynamic loss scaling:
// a loss scale far too large overflows the 16-bit gradients, and those steps are skipped (AdamW does
// not run: its moments stay zero) with the scale halved each time, until it fits and training goes on.
TEST_F(TrainTest, Float16SkipsOverflowingStepsThenTrains) {
  constexpr int kF16Steps = 8;
  const double initial = 1 << 24;  // the loss's gradient alone, 2^24 / 160 tokens, exceeds f16's 65504
  const std::vector<nlohmann::json> steps =
      train_metrics("f16", kPipeline,
                    "--loss-scale dynamic --initial-loss-scale " + std::to_string(initial) +
                        " --checkpoint-every 1 --keep-checkpoints 100",
                    "f16", kF16Steps);
  ASSERT_EQ(steps.size(), static_cast<size_t>(kF16Steps));
  EXPECT_TRUE(steps[0].at("skipped").get<bool>());
  EXPECT_EQ(steps[0].at("loss_scale").get<double>(), initial);
  EXPECT_NEAR(steps[0].at("loss").get<double>(), std::log(256.0), 0.3);
  // Steps 1 .. first_update overflowed; later steps may overflow again as the gradients grow.
  size_t first_update = 0;
  while (first_update < steps.size() && steps[first_update].at("skipped").get<bool>()) ++first_update;
  std::vector<int64_t> updates_after(steps.size());  // AdamW steps done once step i + 1 is
  for (size_t i = 0; i < steps.size(); ++i)
    updates_after[i] = (i > 0 ? updates_after[i - 1] : 0) + (steps[i].at("skipped").get<bool>() ? 0 : 1);
  EXPECT_GE(first_update, 2u) << "the first loss scale did not overflow twice";
  EXPECT_GE(updates_after.back(), 3) << "fewer than 3 steps updated the weights";
  for (size_t i = 1; i < steps.size(); ++i) {
    const double before = steps[i - 1].at("loss_scale"), now = steps[i].at("loss_scale");
    EXPECT_EQ(now, steps[i - 1].at("skipped").get<bool>() ? before / 2 : before) << "step " << i + 1;
    EXPECT_TRUE(std::isfinite(steps[i].at("loss").get<double>())) << "step " << i + 1;
  }
  std::cout << "f16, loss scale from 2^24:";
  for (const nlohmann::json& step : steps)
    std::cout << " " << step.at("loss").get<double>() << (step.at("skipped").get<bool>() ? " (skipped)" : "");
  std::cout << "\n";
  EXPECT_LT(steps.back().at("loss").get<double>(), steps[first_update].at("loss").get<double>() - 0.1);

  // The checkpoints: after a skipped step AdamW's moments are still zero and the masters are the
  // initial weights; after the last step, neither.
  Runtime runtime{RuntimeOptions{.plugins = {"cpu-reference"}}};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  const heteroauto::Model m = model("f16");
  auto head_state = [&](int step) {
    const Tensor weight = Tensor::empty(device, {m.hidden, m.vocab}, DType::f32);
    const Tensor moment = Tensor::empty(device, {m.hidden, m.vocab}, DType::f32);
    const std::string checkpoint = step_directory((dir_ / "f16" / "checkpoints").string(), step);
    const CheckpointState manifest = read_manifest(checkpoint);
    EXPECT_EQ(manifest.optimizer_steps, updates_after[static_cast<size_t>(step - 1)]);
    read_layer(stream, checkpoint, manifest, m.layers, m.layers,
               {{"lm_head.weight", weight}, {"lm_head.weight.exp_avg", moment}});
    return std::pair{weight.to_host(stream), moment.to_host(stream)};
  };
  const auto [first_weights, first_moments] = head_state(1);
  EXPECT_EQ(first_moments, std::vector<double>(first_moments.size(), 0.0));
  if (first_update >= 2) {
    EXPECT_EQ(head_state(static_cast<int>(first_update)).first, first_weights);
  }
  const auto [last_weights, last_moments] = head_state(kF16Steps);
  EXPECT_NE(last_weights, first_weights);
  EXPECT_NE(last_moments, std::vector<double>(last_moments.size(), 0.0));
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
  // Of it the norm and AdamW, which the distributed optimizer runs on its share only.
  EXPECT_GT(measured.at("update_ns_per_parameter").get<double>(), 0);
  EXPECT_LE(measured.at("update_ns_per_parameter").get<double>(),
            measured.at("optimizer_ns_per_parameter").get<double>());
  // The repeats' spread and the times' uncertainty, with the repeats they come from.
  EXPECT_GE(measured.at("spread").get<double>(), 0);
  EXPECT_GE(measured.at("uncertainty").get<double>(), 0);
  EXPECT_EQ(measured.at("repeats"), 2);
  EXPECT_FALSE(measured.contains("standard_error"));  // a device's own, not the type's
  EXPECT_NE(result.output.find("time +-"), std::string::npos) << result.output;
  // The cpu-reference devices share this machine's cores: the description says so for the planner.
  const nlohmann::json& host = profiled.at("shared_host");
  EXPECT_GE(host.at("cores").get<double>(), 1);
  EXPECT_GE(host.at("threads_per_device").get<double>(), 1);
  EXPECT_EQ(host.at("node_groups").size(), profiled.at("nodes").size());
  if (std::thread::hardware_concurrency() < 6) {  // fewer cores than the 6 devices: they take turns
    EXPECT_NE(result.output.find(" at a time (they share this machine's"), std::string::npos) << result.output;
  }
  EXPECT_NO_THROW(heteroauto::parse_cluster(profiled));
  result = run_h2("plan --cluster " + out.string() + " --model " + (dir_ / "model.json").string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("measured (h2 profile)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("+ optimizer"), std::string::npos) << result.output;
  // Training on the profiled description later, the ranks compute with the threads they were
  // measured with, whatever share of the cores their own count would give.
  nlohmann::json three_threads = profiled;
  three_threads["shared_host"]["threads_per_device"] = 3;
  write(dir_ / "profiled-3.json", three_threads);
  result = run_h2("train --cluster " + (dir_ / "profiled-3.json").string() + " --model " +
                  (dir_ / "model.json").string() + " --steps 1 --out " + (dir_ / "profiled-run").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream job_file(dir_ / "profiled-run" / "job.json");
  const nlohmann::json job = nlohmann::json::parse(job_file);
  EXPECT_EQ(job.at("plugin_options").at("cpu-reference").at("threads"), "3") << job.dump();

  write(dir_ / "no-plugin.json", cluster_json(""));
  result =
      run_h2("profile --cluster " + (dir_ / "no-plugin.json").string() + " --model " + (dir_ / "model.json").string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("no device type names a \"plugin\""), std::string::npos) << result.output;
}

// `h2 train --profile` measures the devices before it plans, and plans on the measured costs.
TEST_F(TrainTest, TrainProfilesFirstWhenAsked) {
  const fs::path out = dir_ / "profile-first";
  const std::string base =
      "train --cluster " + (dir_ / "cluster.json").string() + " --model " + (dir_ / "model.json").string();
  auto result = run_h2(base + " --profile --steps 1 --out " + out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Profiling small"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("cpu-ref: measured (h2 profile)"), std::string::npos) << result.output;
  std::ifstream in(out / "cluster-profiled.json");
  const nlohmann::json profiled = nlohmann::json::parse(in);
  EXPECT_TRUE(profiled.at("device_types").at(0).at("measured").contains("small"));
  std::ifstream summary_file(out / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(summary_file);
  EXPECT_GT(summary.at("predicted_step_s").get<double>(), 0);
  EXPECT_EQ(summary.at("cost_basis").at("cpu-ref"), "measured (h2 profile)");
  // The measurement's own uncertainty next to the prediction's error.
  EXPECT_TRUE(summary.at("profile_spread").at("cpu-ref").contains("uncertainty")) << summary.dump();
  EXPECT_TRUE(summary.contains("prediction_error"));

  write(dir_ / "profile-plan.json", heteroauto::to_json(make_plan(model(), 2, kSingle)));
  result = run_h2(base + " --profile --plan " + (dir_ / "profile-plan.json").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--profile measures the devices to plan on, and --plan gives the plan"),
            std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace h2::heteropp
