// The exact layer partition: invariants, balance by speed, memory, and infeasibility explained.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "fixtures.hpp"
#include "h2/heteroauto/partition.hpp"

namespace h2::heteroauto {
namespace {

using testing::HasSubstr;

TEST(PartitionTest, LayersFollowSpeedAndSumToTheModel) {
  const Cluster cluster = parse_cluster(test::two_type_cluster());
  auto mj = test::model_7b();
  mj["layers"] = 30;
  const Model model = parse_model(mj);
  const CostModel cost(cluster, model);
  std::vector<StageSpec> stages{{&cluster.nodes[0], 2, 0, true, false}, {&cluster.nodes[1], 2, 0, false, true}};
  const Partition p = partition_layers(cost, stages, 1, 8);
  ASSERT_TRUE(p.feasible) << p.binding;
  int total = 0;
  for (const auto& s : p.stages) {
    EXPECT_GE(s.layers, 1);
    total += s.layers;
  }
  EXPECT_EQ(total, 30);
  // The fast type has twice the peak: about twice the layers (the LM head sits on the slow last stage).
  EXPECT_GT(p.stages[0].layers, p.stages[1].layers);
  // No other split has a smaller bottleneck.
  for (int first = 1; first < 30; ++first) {
    std::vector<StageSpec> s = p.stages;
    s[0].layers = first;
    s[1].layers = 30 - first;
    bool fits = true;
    double worst = 0;
    for (int k = 0; k < 2; ++k) {
      fits &= cost.stage_memory(s[k], 1, std::min(8, 2 - k)) <= cost.device_capacity(s[k]);
      const StageTime t = cost.stage_time(s[k], 1);
      worst = std::max(worst, t.forward + t.backward);
    }
    if (fits && s[0].recompute == p.stages[0].recompute && s[1].recompute == p.stages[1].recompute) {
      EXPECT_GE(worst, p.bottleneck - 1e-12) << "first stage " << first;
    }
  }
}

TEST(PartitionTest, MemoryForcesRecomputeOrFails) {
  const Cluster cluster = parse_cluster(test::two_type_cluster());
  const Model model = parse_model(test::model_7b());
  const CostModel cost(cluster, model);
  // 32 layers of a 7B model on one 32 GiB device cannot fit: the error names memory.
  const Partition one = partition_layers(cost, {{&cluster.nodes[1], 1, 0, true, true}}, 1, 8);
  EXPECT_FALSE(one.feasible);
  EXPECT_THAT(one.binding, HasSubstr("memory"));
  // Eight stages of tp 1 on the fast type fit, with recomputation where activations do not.
  std::vector<StageSpec> stages(8, StageSpec{&cluster.nodes[0], 1});
  stages.front().first = true;
  stages.back().last = true;
  const Partition eight = partition_layers(cost, stages, 2, 16);
  ASSERT_TRUE(eight.feasible) << eight.binding;
  int total = 0;
  for (const auto& s : eight.stages) total += s.layers;
  EXPECT_EQ(total, 32);
}

TEST(PartitionTest, MoreStagesThanLayersIsExplained) {
  const Cluster cluster = parse_cluster(test::two_type_cluster());
  const Model model = parse_model(test::small_model());
  const CostModel cost(cluster, model);
  const Partition p = partition_layers(cost, std::vector<StageSpec>(3, StageSpec{&cluster.nodes[0], 1}), 1, 4);
  EXPECT_FALSE(p.feasible);
  EXPECT_THAT(p.binding, HasSubstr("3 stages need at least as many layers"));
}

// Every split of the layers over three stages of different types, each stage taking the fastest
// recomputation that fits: none has a smaller bottleneck than the partition's.
TEST(PartitionTest, MatchesBruteForceOverEverySplitAndRecomputation) {
  const Cluster cluster = parse_cluster(test::two_type_cluster());
  auto mj = test::model_7b();
  mj["layers"] = 20;
  const Model model = parse_model(mj);
  const CostModel cost(cluster, model);
  for (int micro_batch : {1, 2}) {
    std::vector<StageSpec> stages{{&cluster.nodes[1], 1, 0, true, false},
                                  {&cluster.nodes[0], 2, 0, false, false},
                                  {&cluster.nodes[0], 1, 0, false, true}};
    const int m = 6;
    double best = std::numeric_limits<double>::infinity();
    for (int a = 1; a < 20; ++a)
      for (int b = 1; a + b < 20; ++b) {
        const int counts[3] = {a, b, 20 - a - b};
        double worst = 0;
        for (int k = 0; k < 3 && worst < best; ++k) {
          StageSpec s = stages[k];
          s.layers = counts[k];
          double fastest = std::numeric_limits<double>::infinity();
          for (Recompute r : model.recompute) {
            s.recompute = r;
            if (cost.stage_memory(s, micro_batch, std::min(m, 3 - k)) > cost.device_capacity(s)) continue;
            const StageTime t = cost.stage_time(s, micro_batch);
            fastest = std::min(fastest, t.forward + t.backward);
          }
          worst = std::max(worst, fastest);
        }
        best = std::min(best, worst);
      }
    const Partition p = partition_layers(cost, stages, micro_batch, m);
    ASSERT_TRUE(p.feasible) << p.binding;
    EXPECT_NEAR(p.bottleneck, best, best * 1e-9) << "micro-batch " << micro_batch;
    double worst = 0;
    for (int k = 0; k < 3; ++k) {
      const StageTime t = cost.stage_time(p.stages[k], micro_batch);
      worst = std::max(worst, t.forward + t.backward);
      EXPECT_LE(cost.stage_memory(p.stages[k], micro_batch, std::min(m, 3 - k)), cost.device_capacity(p.stages[k]));
    }
    EXPECT_NEAR(worst, p.bottleneck, best * 1e-9);
  }
}

}  // namespace
}  // namespace h2::heteroauto
