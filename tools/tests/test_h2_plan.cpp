// `h2 plan` as a user runs it: every shipped example plans (or explains why not), the JSON and the
// plan file are what `h2 train` reads, and bad input gets a message naming it and a non-zero exit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <set>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using h2::test::env_or_fail;
using h2::test::run_h2;
using testing::HasSubstr;
using testing::Not;

std::string example(const std::string& relative) {
  return (fs::path(env_or_fail("H2_SOURCE_ROOT")) / "examples" / relative).string();
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("h2_plan_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

TEST(H2Plan, EveryExampleClusterPlansTheSevenBillionModel) {
  for (const char* cluster : {"local", "h2-1024", "hexiscale-like", "holmes-like"}) {
    SCOPED_TRACE(cluster);
    auto r = run_h2("plan --cluster " + example(std::string("clusters/") + cluster + ".json") + " --model " +
                    example("models/dense-7b.json"));
    if (std::string(cluster) == "local") {  // 4 small CPU devices cannot hold 7B parameters
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_THAT(r.output, HasSubstr("nothing fits: memory"));
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_THAT(r.output, HasSubstr("Plan 1:"));
      EXPECT_THAT(r.output, HasSubstr("bottleneck"));
    }
  }
}

TEST(H2Plan, EveryExampleModelPlansOnTheLargestCluster) {
  for (const char* model : {"dense-7b", "dense-13b", "dense-30b", "dense-100b"}) {
    SCOPED_TRACE(model);
    auto r = run_h2("plan --json --cluster " + example("clusters/h2-1024.json") + " --model " +
                    example(std::string("models/") + model + ".json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_FALSE(j["plans"].empty());
    EXPECT_EQ(j["plans"][0]["format"], "h2-plan");
    EXPECT_GT(j["plans"][0]["prediction"]["tokens_per_s"].get<double>(), 0);
  }
}

TEST(H2Plan, TinyModelPlansOnTheLocalCpuDevicesAndWritesThePlanFile) {
  const fs::path out = scratch("plan.json");
  auto r = run_h2("plan --explain --top 2 -o " + out.string() + " --cluster " + example("clusters/local.json") +
                  " --model " + example("models/gpt-tiny.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Search"));
  EXPECT_THAT(r.output, HasSubstr("Plan 2:"));
  EXPECT_THAT(r.output, HasSubstr("Wrote the best plan"));
  std::ifstream in(out);
  const auto plan = nlohmann::json::parse(in);
  EXPECT_EQ(plan["format"], "h2-plan");
  EXPECT_EQ(plan["model"]["name"], "gpt-tiny");
  fs::remove_all(out.parent_path());
}

// HeteroAuto's best plans for a 30B model on the HexiScale-like cluster cut a layer with different
// tensor-parallel degrees in two pipeline classes (HexiScale's asymmetric tensor parallelism), which
// A profiled device type calibrated on homogeneous runs: what was fitted is in the JSON for programs,
// and runs that cannot show a profile's fixed share are refused by name.
TEST(H2Plan, SaysWhatCalibrationFitted) {
  const nlohmann::json model = {{"name", "small"}, {"layers", 2},       {"hidden", 64},
                                {"ffn", 256},      {"heads", 4},        {"seq_len", 16},
                                {"vocab", 100},    {"global_batch", 8}, {"micro_batch_sizes", {1, 2}},
                                {"dtype", "bf16"}};
  const nlohmann::json nodes = {
      {"count", 1}, {"devices_per_node", 8}, {"intra_node_bandwidth_gbps", 2400}, {"nic", "ib"}, {"nics_per_node", 8}};
  const auto run = [&](int tp, int micro_batch, double step) {
    return nlohmann::json{{"source", "tp " + std::to_string(tp)},
                          {"model", model},
                          {"nodes", nodes},
                          {"layout", {{"tp", tp}, {"pp", 1}, {"micro_batch", micro_batch}}},
                          {"step_time_s", step}};
  };
  nlohmann::json cluster = {
      {"name", "calibrated"},
      {"device_types",
       {{{"name", "gpu"},
         {"vendor", "A"},
         {"peak_tflops", {{"bf16", 200}}},
         {"memory_gib", 80},
         {"measured", {{"small", {{"layer", {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}}}}}}}},
         {"calibrated_from", {run(2, 1, 0.12), run(4, 1, 0.1)}}}}},
      {"nic_types", {{{"name", "ib"}, {"type", "infiniband"}, {"bandwidth_gbps", 200}, {"latency_us", 2}}}},
      {"nodes", {nodes}}};
  cluster["nodes"][0]["name"] = "gpus";
  cluster["nodes"][0]["device_type"] = "gpu";
  const fs::path cluster_file = scratch("calibrated.json"), model_file = scratch("small.json");
  std::ofstream(cluster_file) << cluster.dump();
  std::ofstream(model_file) << model.dump();
  const std::string args = " --cluster " + cluster_file.string() + " --model " + model_file.string();
  auto r = run_h2("plan --json" + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto fits = nlohmann::json::parse(r.output).at("calibration");
  ASSERT_EQ(fits.size(), 1u) << fits;
  EXPECT_EQ(fits[0]["device_type"], "gpu");
  EXPECT_EQ(fits[0]["fitted"], "fixed_share");
  EXPECT_EQ(fits[0]["model"], "small");
  EXPECT_EQ(fits[0]["measured_step_s"].size(), 2u);
  EXPECT_GE(fits[0]["value"].get<double>(), 0);
  EXPECT_LE(fits[0]["value"].get<double>(), 0.9);
  r = run_h2("plan --explain" + args);
  EXPECT_THAT(r.output, HasSubstr("calibrated gpu: fixed share "));
  cluster["device_types"][0]["calibrated_from"] = {run(1, 1, 0.5)};
  std::ofstream(cluster_file) << cluster.dump();
  r = run_h2("plan" + args);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("device type 'gpu': calibrated_from: no run of small depends on its profile's fixed share"));
}

// h2 train runs: -o writes the best plan, whatever its degrees. (Without the distributed optimizer
// the best plan of this case holds a layer at two degrees; with it, chosen by default, it does not.)
TEST(H2Plan, TheWrittenPlanIsTheBestOneAsymmetricDegreesIncluded) {
  const fs::path out = scratch("best.json");
  const std::string args = " --top 5 --no-distributed-optimizer --cluster " + example("clusters/hexiscale-like.json") +
                           " --model " + example("models/dense-30b.json");
  auto r = run_h2("plan -o " + out.string() + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Wrote the best plan to " + out.string()));
  EXPECT_THAT(r.output, Not(HasSubstr("cannot run")));
  std::ifstream in(out);
  const auto written = nlohmann::json::parse(in);
  r = run_h2("plan --json" + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plans = nlohmann::json::parse(r.output)["plans"];
  EXPECT_EQ(written, plans[0]);
  // Some layer is held with two tensor-parallel degrees (the case h2 train used to refuse).
  std::map<int, std::set<int>> degrees;
  for (const auto& pipeline : written["pipelines"])
    for (const auto& stage : pipeline["stages"])
      for (int layer = stage["first_layer"]; layer < stage["first_layer"].get<int>() + stage["layers"].get<int>();
           ++layer)
        degrees[layer].insert(stage["tp"].get<int>());
  EXPECT_TRUE(std::any_of(degrees.begin(), degrees.end(), [](const auto& d) { return d.second.size() > 1; }))
      << written.dump();
  fs::remove_all(out.parent_path());
}

// Without either flag the plan is chosen with and without the distributed optimizer, and says which.
TEST(H2Plan, SaysWhetherThePlanUsesTheDistributedOptimizer) {
  const std::string args = " --top 1 --explain --cluster " + example("clusters/h2-1024.json") + " --model " +
                           example("models/dense-30b.json");
  auto chosen = run_h2("plan" + args);
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_THAT(chosen.output, HasSubstr("distributed optimizer: chosen: its best plan takes"));
  EXPECT_THAT(chosen.output, HasSubstr("micro-batch 1, distributed optimizer\n"));
  EXPECT_THAT(chosen.output, HasSubstr("optimizer      distributed: "));
  EXPECT_THAT(chosen.output, HasSubstr("gathering the updated weights"));
  auto never = run_h2("plan --no-distributed-optimizer" + args);
  ASSERT_EQ(never.exit_code, 0) << never.output;
  EXPECT_THAT(never.output, Not(HasSubstr("distributed optimizer: ")));
  EXPECT_THAT(never.output, HasSubstr("optimizer      replicated: "));
  EXPECT_THAT(never.output, Not(HasSubstr("gathering the updated weights")));
}

// --max-tp bounds every stage's tensor-parallel degree.
TEST(H2Plan, MaxTpBoundsTheTensorParallelDegree) {
  for (int max_tp : {1, 2}) {
    SCOPED_TRACE(max_tp);
    auto r = run_h2("plan --json --top 20 --max-tp " + std::to_string(max_tp) + " --cluster " +
                    example("clusters/h2-1024.json") + " --model " + example("models/dense-13b.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_FALSE(j["plans"].empty());
    for (const auto& plan : j["plans"])
      for (const auto& pipeline : plan["pipelines"])
        for (const auto& stage : pipeline["stages"]) EXPECT_LE(stage["tp"].get<int>(), max_tp);
  }
}

TEST(H2Plan, BadInputIsNamed) {
  auto missing = run_h2("plan --cluster /nonexistent.json --model " + example("models/dense-7b.json"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent.json"));

  const fs::path broken = scratch("broken.json");
  std::ofstream(broken) << R"({"name": "x", "layers": 0})";
  auto bad_model = run_h2("plan --cluster " + example("clusters/local.json") + " --model " + broken.string());
  EXPECT_EQ(bad_model.exit_code, 1);
  EXPECT_THAT(bad_model.output, HasSubstr("model " + broken.string()));

  std::ofstream(broken) << "{not json";
  auto not_json = run_h2("plan --cluster " + broken.string() + " --model " + example("models/dense-7b.json"));
  EXPECT_EQ(not_json.exit_code, 1);
  EXPECT_THAT(not_json.output, HasSubstr("not valid JSON"));

  auto flag = run_h2("plan --cluster " + example("clusters/local.json") + " --model " +
                     example("models/dense-7b.json") + " --tpo 3");
  EXPECT_NE(flag.exit_code, 0);
  EXPECT_THAT(flag.output, HasSubstr("--tpo"));
  auto top = run_h2("plan --cluster " + example("clusters/local.json") + " --model " + example("models/dense-7b.json") +
                    " --top 0");
  EXPECT_NE(top.exit_code, 0);
  EXPECT_THAT(top.output, HasSubstr("--top"));
  auto both = run_h2("plan --cluster " + example("clusters/local.json") + " --model " +
                     example("models/dense-7b.json") + " --distributed-optimizer --no-distributed-optimizer");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.output, HasSubstr("--no-distributed-optimizer"));
  fs::remove_all(broken.parent_path());
}

}  // namespace
