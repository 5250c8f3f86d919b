// The cost model against hand-computed cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "h2/heteroauto/cost_model.hpp"

namespace h2::heteroauto {
namespace {

struct TwoTypes {
  Cluster cluster = parse_cluster(test::two_type_cluster());
  Model model = parse_model(test::small_model());
  CostModel cost{cluster, model};
  const NodeGroup* fast = &cluster.nodes[0];
  const NodeGroup* slow = &cluster.nodes[1];
};

TEST(CostModelTest, ParametersAndFlopsByHand) {
  TwoTypes s;
  // h = 64, ffn = 256, MHA: attention 4 h^2 = 16384, MLP 2 h ffn = 32768, norms 2 h = 128.
  EXPECT_DOUBLE_EQ(s.cost.layer_parameters(), 49280);
  EXPECT_DOUBLE_EQ(s.cost.embedding_parameters(), 6400);
  // Forward: 2 b s (matrix parameters) + 4 b s^2 h with b = 2, s = 16.
  EXPECT_DOUBLE_EQ(s.cost.layer_forward_flops(2), 2.0 * 2 * 16 * 49152 + 4.0 * 2 * 16 * 16 * 64);
  // With ffn = 4h this is the textbook 24 b s h^2 (1 + s / 6h) per forward.
  EXPECT_DOUBLE_EQ(s.cost.layer_forward_flops(2), 24.0 * 2 * 16 * 64 * 64 * (1 + 16.0 / (6 * 64)));
}

TEST(CostModelTest, FirstStageMemoryByHand) {
  TwoTypes s;
  StageSpec first{s.fast, 1, 1, true, false, Recompute::none};
  // (layer + embedding) x 18 bytes (bf16 weights, f32 gradient, master and moments) + 2 in flight x
  // 34 b s h + 2 in flight x b s h x 2 bytes.
  const double expected = (49280.0 + 6400) * 18 + 2 * 34.0 * 2 * 16 * 64 + 2 * 2.0 * 16 * 64 * 2;
  EXPECT_DOUBLE_EQ(s.cost.stage_memory(first, 2, 2), expected);
  // Tensor parallelism divides the state and the activations.
  StageSpec sharded = first;
  sharded.tp = 2;
  EXPECT_LT(s.cost.stage_memory(sharded, 2, 2), expected);
}

TEST(CostModelTest, LastStageHoldsTheLogitsAndFullRecomputeKeepsInputsOnly) {
  TwoTypes s;
  StageSpec last{s.slow, 1, 1, false, true, Recompute::none};
  const double state = (49280.0 + 6400 + 64) * 18;
  const double logits = 2.0 * 16 * 100 * (2 + 4);
  EXPECT_DOUBLE_EQ(s.cost.stage_memory(last, 2, 1), state + 34.0 * 2 * 16 * 64 + logits);
  last.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(s.cost.stage_memory(last, 2, 1), state + 2.0 * 2 * 16 * 64 + 34.0 * 2 * 16 * 64 + logits);
}

TEST(CostModelTest, AnalyticTimeFollowsPeakAndRecomputeAddsAForward) {
  TwoTypes s;
  StageSpec on_fast{s.fast, 1, 2, false, false, Recompute::none}, on_slow{s.slow, 1, 2, false, false, Recompute::none};
  const StageTime fast = s.cost.stage_time(on_fast, 1), slow = s.cost.stage_time(on_slow, 1);
  EXPECT_DOUBLE_EQ(fast.forward, 2 * s.cost.layer_forward_flops(1) / (200e12 * 0.5));
  EXPECT_DOUBLE_EQ(fast.backward, 2 * fast.forward);
  EXPECT_DOUBLE_EQ(slow.forward, 2 * fast.forward);
  on_fast.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(s.cost.stage_time(on_fast, 1).backward, 3 * fast.forward);
}

// A measured profile for the model replaces peak x efficiency: linear between measured micro-batch
// sizes, proportional beyond them; embedding and head on the first and last stage; the optimizer per
// parameter. A profile of another model is not used.
TEST(CostModelTest, MeasuredProfileInterpolatesAndAddsEmbeddingHeadAndOptimizer) {
  auto c = test::two_type_cluster();
  c["device_types"][0]["measured"]["small"] = {
      {"layer",
       {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}},
        {{"micro_batch", 4}, {"forward_ms", 70}, {"backward_ms", 110}}}},
      {"embedding", {{{"micro_batch", 1}, {"forward_ms", 1}, {"backward_ms", 3}}}},
      {"head", {{{"micro_batch", 2}, {"forward_ms", 4}, {"backward_ms", 6}}}},
      {"optimizer_ns_per_parameter", 2}};
  c["device_types"][1]["measured"]["other-model"] = c["device_types"][0]["measured"]["small"];
  const Cluster cluster = parse_cluster(c);
  const Model model = parse_model(test::small_model());
  const CostModel cost(cluster, model);
  StageSpec middle{&cluster.nodes[0], 1, 2, false, false, Recompute::none};
  EXPECT_DOUBLE_EQ(cost.stage_time(middle, 1).forward, 2 * 10e-3);
  EXPECT_DOUBLE_EQ(cost.stage_time(middle, 2).forward, 2 * 30e-3);   // a third of the way from 1 to 4
  EXPECT_DOUBLE_EQ(cost.stage_time(middle, 3).backward, 2 * 80e-3);  // two thirds
  EXPECT_DOUBLE_EQ(cost.stage_time(middle, 8).forward, 2 * 140e-3);  // twice the largest
  middle.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(cost.stage_time(middle, 1).backward, 2 * (20e-3 + 10e-3));
  const StageSpec whole{&cluster.nodes[0], 1, 2, true, true, Recompute::none};
  EXPECT_DOUBLE_EQ(cost.stage_time(whole, 1).forward, 2 * 10e-3 + 1e-3 + 2e-3);  // head scaled from 2 down to 1
  EXPECT_DOUBLE_EQ(cost.stage_time(whole, 1).backward, 2 * 20e-3 + 3e-3 + 3e-3);
  EXPECT_DOUBLE_EQ(cost.optimizer_time(whole), cost.stage_parameters(whole) * 2e-9);
  EXPECT_DOUBLE_EQ(cost.stage_parameters(whole), 2 * 49280.0 + 2 * 6400 + 64);
  // The slow type's profile is for another model: peak x efficiency, and no optimizer estimate.
  const StageSpec on_slow{&cluster.nodes[1], 1, 2, false, false, Recompute::none};
  EXPECT_EQ(cost.measured(cluster.device_type(cluster.nodes[1].device_type)), nullptr);
  EXPECT_DOUBLE_EQ(cost.stage_time(on_slow, 1).forward, 2 * cost.layer_forward_flops(1) / (100e12 * 0.5));
  EXPECT_EQ(cost.optimizer_time(on_slow), 0);
}

// The distributed optimizer runs the norm and AdamW on 1/replicas of a stage's parameters, the zeroing
// of the gradients on all of them; a profile that does not say how much of its optimizer time is the
// update is charged whole.
TEST(CostModelTest, TheDistributedOptimizerUpdatesOnlyItsShare) {
  auto c = test::two_type_cluster();
  c["device_types"][0]["measured"]["small"] = {
      {"layer", {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}}}},
      {"optimizer_ns_per_parameter", 2},
      {"update_ns_per_parameter", 1.5}};
  const Cluster cluster = parse_cluster(c);
  const Model model = parse_model(test::small_model());
  const CostModel plain(cluster, model), sharded(cluster, model, {.distributed_optimizer = true});
  StageSpec stage{&cluster.nodes[0], 1, 2, false, false, Recompute::none};
  stage.replicas = 4;
  const double parameters = plain.device_parameters(stage);
  EXPECT_DOUBLE_EQ(plain.optimizer_time(stage), parameters * 2e-9);
  EXPECT_DOUBLE_EQ(sharded.optimizer_time(stage), parameters * (0.5 + 1.5 / 4) * 1e-9);
  stage.replicas = 1;
  EXPECT_DOUBLE_EQ(sharded.optimizer_time(stage), parameters * 2e-9);

  c["device_types"][0]["measured"]["small"].erase("update_ns_per_parameter");
  const Cluster unsaid = parse_cluster(c);
  stage.nodes = &unsaid.nodes[0];
  stage.replicas = 4;
  EXPECT_DOUBLE_EQ(CostModel(unsaid, model, {.distributed_optimizer = true}).optimizer_time(stage), parameters * 2e-9);

  c["device_types"][0]["measured"]["small"]["update_ns_per_parameter"] = 3;
  EXPECT_THAT([&] { parse_cluster(c); }, testing::ThrowsMessage<DescriptionError>(
                                             testing::HasSubstr("must not exceed optimizer_ns_per_parameter")));
}

// Points measured at a tensor-parallel degree are one rank's time with its communication: a stage of
// that degree takes them as they are (tensor parallelism on small layers is far from 1 / tp); a stage
// of a degree without points takes the degree-1 points cut, plus the allreduces the model charges.
TEST(CostModelTest, PointsMeasuredAtATensorParallelDegreeAreTakenAsTheyAre) {
  auto c = test::two_type_cluster();
  c["device_types"][0]["measured"]["small"] = {
      {"layer",
       {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}},
        {{"micro_batch", 2}, {"forward_ms", 18}, {"backward_ms", 36}},
        {{"micro_batch", 1}, {"forward_ms", 8}, {"backward_ms", 15}, {"tp", 2}},
        {{"micro_batch", 2}, {"forward_ms", 12}, {"backward_ms", 25}, {"tp", 2}}}},
      {"head",
       {{{"micro_batch", 1}, {"forward_ms", 4}, {"backward_ms", 6}},
        {{"micro_batch", 1}, {"forward_ms", 3}, {"backward_ms", 5}, {"tp", 2}}}}};
  const Cluster cluster = parse_cluster(c);
  const Model model = parse_model(test::small_model());
  const CostModel cost(cluster, model);
  const StageSpec at_two{&cluster.nodes[0], 2, 3, false, true, Recompute::none};
  // The head's degree-2 point is at micro-batch 1 only: at 2 it adds half of what degree 1 adds
  // from 1 to 2 (4 ms, scaled: 8 ms at 2).
  EXPECT_DOUBLE_EQ(cost.stage_time(at_two, 2).forward, 3 * 12e-3 + 3e-3 + (8e-3 - 4e-3) / 2);
  // Beyond the largest degree-2 size of the layer (2): degree 1 grows from 18 ms at 2 to 36 ms at 4.
  const StageSpec layer_at_two{&cluster.nodes[0], 2, 1, false, false, Recompute::none};
  EXPECT_DOUBLE_EQ(cost.stage_time(layer_at_two, 4).forward, 12e-3 + (36e-3 - 18e-3) / 2);
  EXPECT_DOUBLE_EQ(cost.stage_time(at_two, 1).backward, 3 * 15e-3 + 5e-3);
  const StageSpec at_four{&cluster.nodes[0], 4, 1, false, false, Recompute::none};
  const double allreduce = cost.allreduce_time(cost.intra_node_link(cluster.nodes[0]), cost.boundary_bytes(1), 4);
  EXPECT_DOUBLE_EQ(cost.stage_time(at_four, 1).forward, 10e-3 / 4 + 2 * allreduce);
  // Degree-1 points are needed (the fallback); degrees ascend.
  c["device_types"][0]["measured"]["small"]["layer"].erase(0);
  c["device_types"][0]["measured"]["small"]["layer"].erase(0);
  EXPECT_THROW(parse_cluster(c), DescriptionError);
  c["device_types"][0]["measured"]["small"]["layer"].push_back(
      {{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}});
  try {
    parse_cluster(c);
    FAIL() << "descending degrees were accepted";
  } catch (const DescriptionError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("tp: must not be smaller than the previous entry's (2)"));
  }
}

// A profile's fixed share (the part of a pass that neither a larger micro-batch nor tensor
// parallelism shrinks) stays whole: scaled beyond the measured sizes a pass takes it plus the rest
// scaled, and a stage of degree d takes it plus 1/d of the rest. Without one everything scales.
TEST(CostModelTest, AProfilesFixedShareIsNeitherScaledNorCut) {
  auto c = test::two_type_cluster();
  c["device_types"][0]["measured"]["small"] = {
      {"layer", {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}}}},
      {"head", {{{"micro_batch", 1}, {"forward_ms", 4}, {"backward_ms", 8}}}},
      {"fixed_share", 0.25}};
  const Cluster cluster = parse_cluster(c);
  const Model model = parse_model(test::small_model());
  const CostModel cost(cluster, model);
  const StageSpec one{&cluster.nodes[0], 1, 1, false, false, Recompute::none};
  EXPECT_DOUBLE_EQ(cost.stage_time(one, 1).forward, 10e-3);
  EXPECT_DOUBLE_EQ(cost.stage_time(one, 4).forward, 2.5e-3 + 4 * 7.5e-3);
  EXPECT_DOUBLE_EQ(cost.stage_time(one, 4).backward, 5e-3 + 4 * 15e-3);
  const StageSpec cut{&cluster.nodes[0], 2, 1, false, false, Recompute::none};
  const double allreduce = cost.allreduce_time(cost.intra_node_link(cluster.nodes[0]), cost.boundary_bytes(2), 2);
  EXPECT_DOUBLE_EQ(cost.stage_time(cut, 2).forward, 2.5e-3 + 2 * 7.5e-3 / 2 + 2 * allreduce);
  const StageSpec head{&cluster.nodes[0], 1, 0, false, true, Recompute::none};
  EXPECT_DOUBLE_EQ(cost.stage_time(head, 2).forward, 1e-3 + 2 * 3e-3);
  // Beyond the largest size measured at degree 2 (4), degree 1 grows from 4 to 8 with its fixed part
  // kept: 2.5 + 9.5 b / 2 ms, so from 21.5 to 40.5 ms, cut 2 ways.
  c["device_types"][0]["measured"]["small"]["layer"] = {
      {{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}},
      {{"micro_batch", 2}, {"forward_ms", 12}, {"backward_ms", 24}},
      {{"micro_batch", 1}, {"forward_ms", 8}, {"backward_ms", 16}, {"tp", 2}},
      {{"micro_batch", 4}, {"forward_ms", 12}, {"backward_ms", 24}, {"tp", 2}}};
  const Cluster both = parse_cluster(c);
  EXPECT_DOUBLE_EQ(CostModel(both, model).stage_time({&both.nodes[0], 2, 1, false, false, Recompute::none}, 8).forward,
                   12e-3 + (40.5e-3 - 21.5e-3) / 2);
  c["device_types"][0]["measured"]["small"]["fixed_share"] = 0;
  const Cluster scaled = parse_cluster(c);
  EXPECT_DOUBLE_EQ(
      CostModel(scaled, model).stage_time({&scaled.nodes[0], 1, 1, false, false, Recompute::none}, 4).forward, 24e-3);
  c["device_types"][0]["measured"]["small"]["fixed_share"] = 1;
  try {
    parse_cluster(c);
    FAIL() << "a fixed share of 1 was accepted";
  } catch (const DescriptionError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("fixed_share"));
  }
}

TEST(CostModelTest, CommunicationByHand) {
  TwoTypes s;
  const Link link{100, 10, false, 0};  // 100 Gbit/s, 10 us
  EXPECT_DOUBLE_EQ(s.cost.transfer_time(link, 1.25e9), 10e-6 + 0.1);
  // Ring of 4: 2 (n - 1) latencies and 2 (n - 1) / n of the bytes.
  EXPECT_DOUBLE_EQ(s.cost.allreduce_time(link, 1.25e9, 4), 6 * 10e-6 + 1.5 * 0.1);
  EXPECT_EQ(s.cost.allreduce_time(link, 1.25e9, 1), 0);
  // A-to-B has no device-direct RDMA: the transfer is staged through host memory.
  StageSpec a{s.fast}, b{s.slow};
  EXPECT_TRUE(s.cost.link_between(a, b, false, 1, 1).host_staged);
  EXPECT_FALSE(s.cost.link_between(a, a, true, 1, 1).host_staged);
}

TEST(CostModelTest, ModelDtypeWithoutAPeakIsAnError) {
  auto c = test::two_type_cluster();
  c["device_types"][1]["peak_tflops"] = {{"f32", 10}};
  const Cluster cluster = parse_cluster(c);
  const Model model = parse_model(test::small_model());
  EXPECT_THROW(CostModel(cluster, model), DescriptionError);
}

}  // namespace
}  // namespace h2::heteroauto
