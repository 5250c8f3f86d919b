// The cost model against hand-computed cases.
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
  // (layer + embedding) x 16 bytes + 2 in flight x 34 b s h + 2 in flight x b s h x 2 bytes.
  const double expected = (49280.0 + 6400) * 16 + 2 * 34.0 * 2 * 16 * 64 + 2 * 2.0 * 16 * 64 * 2;
  EXPECT_DOUBLE_EQ(s.cost.stage_memory(first, 2, 2), expected);
  // Tensor parallelism divides the state and the activations.
  StageSpec sharded = first;
  sharded.tp = 2;
  EXPECT_LT(s.cost.stage_memory(sharded, 2, 2), expected);
}

TEST(CostModelTest, LastStageHoldsTheLogitsAndFullRecomputeKeepsInputsOnly) {
  TwoTypes s;
  StageSpec last{s.slow, 1, 1, false, true, Recompute::none};
  const double state = (49280.0 + 6400 + 64) * 16;
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

TEST(CostModelTest, CommunicationByHand) {
  TwoTypes s;
  const Link link{100, 10, false, 0};  // 100 Gbit/s, 10 us
  EXPECT_DOUBLE_EQ(s.cost.transfer_time(link, 1.25e9), 10e-6 + 0.1);
  // Ring of 4: 2 (n - 1) latencies and 2 (n - 1) / n of the bytes.
  EXPECT_DOUBLE_EQ(s.cost.allreduce_time(link, 1.25e9, 4), 6 * 10e-6 + 1.5 * 0.1);
  EXPECT_EQ(s.cost.allreduce_time(link, 1.25e9, 1), 0);
  // A-to-B has no device-direct RDMA: the transfer is staged through host memory.
  StageSpec a{s.fast}, b{s.slow};
  EXPECT_TRUE(s.cost.link_between(a, b, false).host_staged);
  EXPECT_FALSE(s.cost.link_between(a, a, true).host_staged);
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
