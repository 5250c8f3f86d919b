// The 1F1B simulator against closed forms.
#include <gtest/gtest.h>

#include <random>

#include "h2/heteroauto/simulator.hpp"

namespace h2::heteroauto {
namespace {

PipelineTimes equal(int p, double f, double b, double c = 0) {
  return {std::vector<double>(p, f), std::vector<double>(p, b), std::vector<double>(p - 1, c)};
}

TEST(Simulator, EqualStagesMatchTheClosedForm) {
  for (int p : {1, 2, 4, 7})
    for (int m : {1, 3, 8, 32}) {
      const Simulation s = simulate_pipeline(equal(p, 1.0, 2.0), m);
      EXPECT_DOUBLE_EQ(s.makespan, (m + p - 1) * 3.0) << "p " << p << " m " << m;
      EXPECT_NEAR(s.bubble_fraction, (p - 1.0) / (m + p - 1), 1e-12);
      EXPECT_EQ(s.ops.size(), static_cast<size_t>(2 * p * m));
      const Simulation g = simulate_pipeline(equal(p, 1.0, 2.0), m, Schedule::gpipe);
      EXPECT_DOUBLE_EQ(g.makespan, (m + p - 1) * 3.0);
    }
}

TEST(Simulator, OneStageIsTheSumOfItsWork) {
  const Simulation s = simulate_pipeline({{2.0}, {3.0}, {}}, 5);
  EXPECT_DOUBLE_EQ(s.makespan, 25.0);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 0);
}

TEST(Simulator, TransfersDelayTheFirstMicroBatchBothWays) {
  // One micro-batch walks forward through p stages and back: every compute and 2 (p - 1) transfers.
  const Simulation s = simulate_pipeline(equal(3, 1.0, 2.0, 0.5), 1);
  EXPECT_DOUBLE_EQ(s.makespan, 3 * 3.0 + 4 * 0.5);
}

TEST(Simulator, ASlowStageBoundsTheSteadyState) {
  // The slow middle stage is busy m (f + b) and everything else adds the fill and drain around it.
  PipelineTimes t{{1, 3, 1}, {2, 6, 2}, {0, 0}};
  const Simulation s = simulate_pipeline(t, 16);
  EXPECT_GE(s.makespan, 16 * 9.0);
  EXPECT_LE(s.makespan, 16 * 9.0 + 2 * 3.0 + 9.0);
  EXPECT_DOUBLE_EQ(s.busy[1], 16 * 9.0);
}

// Beyond kExactMicroBatches + kRegimePeriod the step is extrapolated by whole periods of the regime the
// pipeline settles into; on random uneven pipelines with transfers it is what the op-by-op simulation
// gives, also where the regime's increments alternate (8.40, 8.25, 8.40, ... was seen).
TEST(Simulator, TheExtrapolatedStepIsTheSimulatedOne) {
  std::mt19937 random(11);
  std::uniform_real_distribution<> duration(0.1, 5), transfer(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    const int p = 1 + static_cast<int>(random() % 8);
    PipelineTimes times;
    for (int k = 0; k < p; ++k) {
      times.forward.push_back(duration(random));
      times.backward.push_back(duration(random));
      if (k + 1 < p) times.transfer.push_back(transfer(random));
    }
    for (Schedule schedule : {Schedule::one_f_one_b, Schedule::gpipe}) {
      for (int m : {kExactMicroBatches + 1, kExactMicroBatches + kRegimePeriod + 1, 3001}) {
        const Simulation exact = simulate_pipeline(times, m, schedule), step = simulate_step(times, m, schedule);
        EXPECT_NEAR(step.makespan, exact.makespan, 1e-9 * exact.makespan) << "trial " << trial << ", m " << m;
        EXPECT_NEAR(step.bubble_fraction, exact.bubble_fraction, 1e-9) << "trial " << trial << ", m " << m;
        EXPECT_TRUE(step.ops.empty());
      }
    }
  }
}

TEST(Simulator, RejectsMalformedInput) {
  EXPECT_THROW(simulate_pipeline({}, 1), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline(equal(2, 1, 1), 0), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline({{1, 1}, {1}, {0}}, 2), std::invalid_argument);
}

}  // namespace
}  // namespace h2::heteroauto
