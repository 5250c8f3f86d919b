// The 1F1B simulator against closed forms.
#include <gtest/gtest.h>

#include <random>

#include "h2/heteroauto/simulator.hpp"

namespace h2::heteroauto {
namespace {

PipelineTimes equal(int p, double f, double b, double c = 0) {
  return {std::vector<double>(p, f), std::vector<double>(p, b), std::vector<double>(p - 1, c)};
}

// 1 to `most` stages of random forward and backward times in [0.1, 5) and transfers in [0, 1).
PipelineTimes random_pipeline(std::mt19937& random, int most) {
  std::uniform_real_distribution<> duration(0.1, 5), transfer(0, 1);
  const int p = 1 + static_cast<int>(random() % most);
  PipelineTimes times;
  for (int k = 0; k < p; ++k) {
    times.forward.push_back(duration(random));
    times.backward.push_back(duration(random));
    if (k + 1 < p) times.transfer.push_back(transfer(random));
  }
  return times;
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

// Where sends block (DeepSpeed's pipeline engine), a stage stays busy for each transfer it sends: the
// slow middle stage sends a forward and a backward per micro-batch, so the steady state grows by two
// transfers per micro-batch (less the last backward's, which ends the step at stage 0 anyway).
TEST(Simulator, BlockingSendsKeepTheSenderBusy) {
  PipelineTimes t{{1, 3, 1}, {2, 6, 2}, {0.5, 0.5}};
  for (int m : {1, 4, 16, 64}) {
    const Simulation overlapped = simulate_pipeline(t, m);
    t.blocking_sends = true;
    const Simulation blocking = simulate_pipeline(t, m);
    t.blocking_sends = false;
    EXPECT_DOUBLE_EQ(blocking.makespan - overlapped.makespan, m == 1 ? 0 : (m - 1) * 2 * 0.5 - 0.5) << "m " << m;
    EXPECT_DOUBLE_EQ(blocking.busy[1], overlapped.busy[1]);  // computing, not sending
  }
  t.blocking_sends = true;
  const int m = kExactMicroBatches + kRegimePeriod + 7;
  EXPECT_NEAR(simulate_step(t, m).makespan, simulate_pipeline(t, m).makespan, 1e-9 * simulate_pipeline(t, m).makespan);
}

// Beyond kExactMicroBatches + kRegimePeriod the step is extrapolated by whole periods of the regime the
// pipeline settles into; on random uneven pipelines with transfers it is what the op-by-op simulation
// gives, also where the regime's increments alternate (8.40, 8.25, 8.40, ... was seen).
TEST(Simulator, TheExtrapolatedStepIsTheSimulatedOne) {
  std::mt19937 random(11);
  for (int trial = 0; trial < 50; ++trial) {
    const PipelineTimes times = random_pipeline(random, 8);
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

// Shared cores: two one-stage pipelines on one core each take twice as long while both compute.
TEST(SharedHost, StagesComputingAtOnceShareTheCores) {
  const SharedPipeline one{{{1.0}, {1.0}, {}}, 1, {1.0}};
  const std::vector<Simulation> shared = simulate_shared({one, one}, 1);
  ASSERT_EQ(shared.size(), 2u);
  for (const Simulation& s : shared) {
    EXPECT_DOUBLE_EQ(s.makespan, 4.0);
    EXPECT_DOUBLE_EQ(s.busy[0], 4.0);  // wall time computing
  }
  // With a core each, or off the host, each runs at full speed.
  for (const Simulation& s : simulate_shared({one, one}, 2)) EXPECT_DOUBLE_EQ(s.makespan, 2.0);
  const SharedPipeline off{{{1.0}, {1.0}, {}}, 1, {0.0}};
  const std::vector<Simulation> mixed = simulate_shared({one, off}, 1);
  EXPECT_DOUBLE_EQ(mixed[0].makespan, 2.0);
  EXPECT_DOUBLE_EQ(mixed[1].makespan, 2.0);
  // A pipeline that ends early leaves the core to the other: 1 s at half speed each (0.5 done), then
  // the longer one's remaining 2.5 s alone.
  const SharedPipeline longer{{{2.0}, {1.0}, {}}, 1, {1.0}};
  const SharedPipeline shorter{{{0.25}, {0.25}, {}}, 1, {1.0}};
  const std::vector<Simulation> uneven = simulate_shared({longer, shorter}, 1);
  EXPECT_DOUBLE_EQ(uneven[1].makespan, 1.0);
  EXPECT_DOUBLE_EQ(uneven[0].makespan, 3.5);
}

// With cores to spare every stage computes at full speed: the shared simulation is simulate_pipeline's.
// One core for a pipeline's stages slows exactly the passes that overlap: one micro-batch never
// overlaps, so it is unchanged; many do, and take longer.
TEST(SharedHost, EnoughCoresIsTheUnsharedPipelineAndOneCoreSlowsOnlyOverlaps) {
  std::mt19937 random(5);
  for (int trial = 0; trial < 30; ++trial) {
    const PipelineTimes times = random_pipeline(random, 6);
    const int p = static_cast<int>(times.forward.size());
    for (int m : {1, 4, 13}) {
      const Simulation alone = simulate_pipeline(times, m);
      const SharedPipeline pipeline{times, m, std::vector<double>(p, 1.0)};
      const Simulation spare = simulate_shared({pipeline}, p).front();
      EXPECT_NEAR(spare.makespan, alone.makespan, 1e-9 * alone.makespan) << "trial " << trial << ", m " << m;
      EXPECT_NEAR(spare.bubble_fraction, alone.bubble_fraction, 1e-9);
      const Simulation one_core = simulate_shared({pipeline}, 1).front();
      double work = 0;
      for (int k = 0; k < p; ++k) work += m * (times.forward[k] + times.backward[k]);
      if (m == 1) {
        EXPECT_NEAR(one_core.makespan, alone.makespan, 1e-9 * alone.makespan);
      }
      EXPECT_GE(one_core.makespan, std::max(alone.makespan, work) * (1 - 1e-9));
    }
  }
}

TEST(Simulator, RejectsMalformedInput) {
  EXPECT_THROW(simulate_pipeline({}, 1), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline(equal(2, 1, 1), 0), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline({{1, 1}, {1}, {0}}, 2), std::invalid_argument);
  EXPECT_THROW(simulate_shared({{equal(2, 1, 1), 1, {1.0}}}, 1), std::invalid_argument);  // demand per stage
  EXPECT_THROW(simulate_shared({{equal(2, 1, 1), 1, {1.0, 1.0}}}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace h2::heteroauto
