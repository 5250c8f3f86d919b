// HeteroPP's runtime pieces that need no second process: which rank does what in a plan, the 1F1B and
// GPipe orders, and checkpoints (atomic commit, incomplete directories ignored, mismatches refused).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "h2/h2.hpp"
#include "h2/heteroauto/schedule.hpp"
#include "h2/heteropp/checkpoint.hpp"
#include "h2/heteropp/placement.hpp"
#include "plan_builder.hpp"

namespace h2::heteropp {
namespace {

namespace fs = std::filesystem;
using heteroauto::Schedule;
using test::make_plan;

heteroauto::Model small_model() {
  heteroauto::Model m;
  m.name = "small";
  m.layers = 5;
  m.hidden = 16;
  m.ffn = 32;
  m.heads = 2;
  m.kv_heads = 2;
  m.seq_len = 8;
  m.vocab = 256;
  m.global_batch = 10;
  m.micro_batch_sizes = {2};
  return m;
}

TEST(ScheduleTest, OneForwardOneBackwardKeepsAtMostTheDepthInFlight) {
  EXPECT_EQ(schedule_string(stage_schedule(Schedule::one_f_one_b, 0, 3, 4)), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(schedule_string(stage_schedule(Schedule::one_f_one_b, 1, 3, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(schedule_string(stage_schedule(Schedule::one_f_one_b, 2, 3, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  // Fewer micro-batches than stages: warm-up stops at the micro-batch count.
  EXPECT_EQ(schedule_string(stage_schedule(Schedule::one_f_one_b, 0, 4, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(schedule_string(stage_schedule(Schedule::gpipe, 1, 3, 3)), "F0 F1 F2 B0 B1 B2");
}

TEST(PlacementTest, RolesNeighboursAndHolders) {
  // Class 0: 2 replicas of 3 uneven stages (2 and 3 micro-batches); class 1: 1 replica of 2 stages.
  const heteroauto::Plan plan =
      make_plan(small_model(), 1, {{{{0, 1}, {1, 3}, {4, 1}}, {2, 3}}, {{{0, 2}, {2, 3}}, {5}}});
  const Placement p = place(plan);
  ASSERT_EQ(p.world_size(), 8);
  EXPECT_EQ(p.global_micro_batches, 10);
  const StageRole& middle = p.roles[4];  // class 0, replica 1, stage 1
  EXPECT_EQ(middle.replica, 1);
  EXPECT_EQ(middle.stage, 1);
  EXPECT_EQ(middle.first_block, 1);
  EXPECT_EQ(middle.end_block, 4);
  EXPECT_EQ(middle.prev_rank, 3);
  EXPECT_EQ(middle.next_rank, 5);
  EXPECT_EQ(middle.micro_batches, 3);
  EXPECT_EQ(middle.first_micro_batch, 2);
  EXPECT_EQ(p.roles[6].first_micro_batch, 5);
  EXPECT_EQ(p.holders.at(-1), (std::vector<int>{0, 3, 6}));  // the embedding: every first stage
  EXPECT_EQ(p.holders.at(1), (std::vector<int>{1, 4, 6}));
  EXPECT_EQ(p.holders.at(2), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(p.holders.at(5), (std::vector<int>{2, 5, 7}));  // the head: every last stage
  EXPECT_EQ(p.owner(2), 1);
  EXPECT_EQ(p.roles[0].layers(5), (std::vector<int>{-1, 0}));
  EXPECT_EQ(p.roles[7].layers(5), (std::vector<int>{2, 3, 4, 5}));
}

// Stages with different tensor-parallel degrees: each rank receives from one rank of the neighbouring
// stage and sends to the ranks whose index matches its own modulo its degree.
TEST(PlacementTest, TensorParallelGroupsAndTheirNeighbours) {
  // Stage 0: tp 2 (ranks 0, 1); stage 1: tp 1 (rank 2); stage 2: tp 2 (ranks 3, 4). Second replica alike.
  const heteroauto::Plan plan = make_plan(small_model(), 1, {{{{0, 1}, {1, 3}, {4, 1}}, {2, 3}, {}, {2, 1, 2}}});
  const Placement p = place(plan);
  ASSERT_EQ(p.world_size(), 10);
  EXPECT_EQ(p.roles[1].tp, 2);
  EXPECT_EQ(p.roles[1].tp_rank, 1);
  EXPECT_EQ(p.roles[1].tp_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.roles[1].send_next, (std::vector<int>{}));  // stage 1's only rank hears from index 0
  EXPECT_EQ(p.roles[0].send_next, (std::vector<int>{2}));
  EXPECT_EQ(p.roles[2].prev_rank, 0);
  EXPECT_EQ(p.roles[2].send_prev, (std::vector<int>{0, 1}));  // both stage-0 ranks need the gradient
  EXPECT_EQ(p.roles[2].send_next, (std::vector<int>{3, 4}));
  EXPECT_EQ(p.roles[4].prev_rank, 2);
  EXPECT_EQ(p.roles[4].send_prev, (std::vector<int>{}));
  EXPECT_EQ(p.roles[3].send_prev, (std::vector<int>{2}));
  EXPECT_EQ(p.roles[1].next_rank, 2);
  EXPECT_EQ(p.holders.at(0), (std::vector<int>{0, 1, 5, 6}));
  EXPECT_EQ(p.piece_holders.at({0, 1}), (std::vector<int>{1, 6}));
  EXPECT_EQ(p.owner_group(4), (std::vector<int>{3, 4}));
  EXPECT_NE(p.roles[3].describe().find("tp 0/2"), std::string::npos) << p.roles[3].describe();
}

// A layer held 2-way in one replica and whole in another: cut into 2 pieces for the gradient sums,
// the whole holder holding both.
TEST(PlacementTest, ALayerCutDifferentlyInTwoReplicasIsSummedPieceByPiece) {
  const Placement p = place(make_plan(small_model(), 2, {{{{0, 5}}, {5}, {}, {2}}, {{{0, 5}}, {5}}}));
  EXPECT_EQ(p.pieces.at(0), 2);
  EXPECT_FALSE(p.uniform_degree(0));
  EXPECT_EQ(p.piece_holders.at({0, 0}), (std::vector<int>{0, 2}));
  EXPECT_EQ(p.piece_holders.at({0, 1}), (std::vector<int>{1, 2}));
  const Placement uniform = place(make_plan(small_model(), 2, {{{{0, 5}}, {2, 3}, {}, {2}}}));
  EXPECT_EQ(uniform.pieces.at(3), 2);
  EXPECT_TRUE(uniform.uniform_degree(3));
}

TEST(PlacementTest, RefusesShortDeviceLists) {
  heteroauto::Plan plan = make_plan(small_model(), 2, {{{{0, 5}}, {5}}});
  plan.pipelines[0].stages[0].tp = 2;
  try {
    place(plan);
    FAIL() << "tp 2 with one device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gives stage 0 1 devices but the stage's tensor-parallel degree is 2"),
              std::string::npos)
        << e.what();
  }
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("h2-checkpoint-test-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    RuntimeOptions options;
    options.plugins = {"cpu-reference"};
    runtime_ = std::make_unique<Runtime>(options);
    stream_ = std::make_unique<Stream>(runtime_->devices().at(0).create_stream());
  }
  void TearDown() override { fs::remove_all(root_); }

  Tensor tensor(std::vector<double> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return Tensor::from_host(*stream_, values, {n}, DType::f32);
  }
  // A model of one block (layers -1, 0, 1), every tensor holding `value`.
  // Returns the committed directory ("" without commit).
  std::string write_step(int64_t step, double value, bool commit, int keep = 2) {
    const std::string dir = begin_checkpoint(root_.string(), step);
    for (int layer = -1; layer <= 1; ++layer) write_layer(*stream_, dir, layer, 1, {{"w", tensor({value, value + 1})}});
    CheckpointState state;
    state.step = step;
    state.samples = step * 10;
    return commit ? commit_checkpoint(root_.string(), dir, state, 1, keep) : "";
  }
  // Layer 0's values in the checkpoint `path` (ROOT or a step directory) names.
  std::vector<double> layer0(const std::string& path) {
    const std::string dir = find_checkpoint(path);
    const Tensor w = tensor({0, 0});
    read_layer(*stream_, dir, read_manifest(dir), 0, 1, {{"w", w}});
    return w.to_host(*stream_);
  }

  fs::path root_;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(CheckpointTest, IncompleteStepsAreIgnoredAndOldOnesPruned) {
  write_step(1, 1, true);
  write_step(2, 2, true);
  write_step(3, 3, false);  // a crash before the manifest
  EXPECT_EQ(fs::path(find_checkpoint(root_.string())).filename(), "step-000002");
  EXPECT_EQ(read_manifest(find_checkpoint(root_.string())).samples, 20);
  write_step(4, 4, true);  // keep 2: step 1 goes, and the incomplete step 3
  EXPECT_FALSE(fs::exists(root_ / "step-000001"));
  EXPECT_TRUE(fs::exists(root_ / "step-000002"));
  EXPECT_FALSE(fs::exists(root_ / "step-000003"));
  EXPECT_FALSE(fs::exists(root_ / "step-000003.partial"));
  EXPECT_EQ(fs::path(find_checkpoint(root_.string())).filename(), "step-000004");
  EXPECT_EQ(layer0(root_.string()), (std::vector<double>{4, 5}));
  EXPECT_FALSE(fs::exists(root_ / "latest.tmp"));
}

// A run resumed from step 2 into the ROOT that already holds steps 4 and 6 used to write its step 4
// into the committed step-000004: killed after one layer file, `latest` named a mix of both runs.
TEST_F(CheckpointTest, ACommittedStepIsNeverWrittenAgain) {
  write_step(2, 2, true, 3);
  write_step(4, 4, true, 3);
  write_step(6, 6, true, 3);
  EXPECT_THROW(write_layer(*stream_, step_directory(root_.string(), 4), 0, 1, {{"w", tensor({9, 9})}}), Error);

  // The resumed run's step 4, killed after its first layer file.
  const std::string partial = begin_checkpoint(root_.string(), 4);
  write_layer(*stream_, partial, 0, 1, {{"w", tensor({40, 41})}});
  EXPECT_EQ(fs::path(find_checkpoint(root_.string())).filename(), "step-000006");
  EXPECT_EQ(layer0(root_.string()), (std::vector<double>{6, 7}));
  EXPECT_EQ(layer0(step_directory(root_.string(), 4)), (std::vector<double>{4, 5}));

  // Its step 4 again, whole: a new directory, and the abandoned run's steps 4 and 6 go.
  const std::string committed = write_step(4, 40, true, 3);
  EXPECT_EQ(fs::path(committed).filename(), "step-000004.2");
  EXPECT_EQ(find_checkpoint(root_.string()), committed);
  EXPECT_EQ(layer0(root_.string()), (std::vector<double>{40, 41}));
  EXPECT_TRUE(fs::exists(root_ / "step-000002"));
  EXPECT_FALSE(fs::exists(root_ / "step-000004"));
  EXPECT_FALSE(fs::exists(root_ / "step-000006"));
  EXPECT_FALSE(fs::exists(root_ / "step-000004.partial"));
}

TEST_F(CheckpointTest, ALayerFileOfAnotherStepIsRefused) {
  const std::string one = write_step(1, 1, true), two = write_step(2, 2, true);
  const std::string name = layer_file_name(0, 1);
  fs::copy_file(fs::path(one) / name, fs::path(two) / name, fs::copy_options::overwrite_existing);
  try {
    layer0(two);
    FAIL() << "a layer file of step 1 was read as step 2's";
  } catch (const Error& e) {
    const std::string expected = (fs::path(two) / name).string() + " is not the file its manifest names: its header";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, MismatchesAreRefusedByName) {
  write_step(1, 1, true);
  const std::string dir = find_checkpoint(root_.string());
  const CheckpointState written = read_manifest(dir);
  const auto message = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              read_layer(*stream_, dir, written, 0, 1, {{"w", tensor({0, 0, 0})}});
            }).find("w is [2] there but [3]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              read_layer(*stream_, dir, written, 0, 1, {{"v", tensor({0})}});
            }).find("has no tensor v"),
            std::string::npos);
  // One flipped bit in the head's data (its last byte: the file ends with its only tensor).
  const fs::path head = fs::path(dir) / layer_file_name(1, 1);
  {
    std::fstream file(head, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    const char last = static_cast<char>(file.get());
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(last ^ 0x10));
  }
  const std::string damaged = message([&] { read_layer(*stream_, dir, written, 1, 1, {{"w", tensor({0, 0})}}); });
  EXPECT_NE(damaged.find(head.string() + " is damaged: the data of w hashes to "), std::string::npos) << damaged;
  // A digit changed in the manifest: the data position would move silently.
  const fs::path manifest = fs::path(dir) / "manifest.json";
  std::string text;
  {
    std::ifstream in(manifest);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t samples = text.find("\"samples\": 10");
  ASSERT_NE(samples, std::string::npos) << text;
  text[samples + 12] = '9';
  std::ofstream(manifest) << text;
  const std::string damaged_manifest = message([&] { read_manifest(dir); });
  EXPECT_NE(damaged_manifest.find(manifest.string() + " is damaged: its content hashes to "), std::string::npos)
      << damaged_manifest;
  fs::resize_file(fs::path(dir) / layer_file_name(0, 1), 40);
  EXPECT_NE(message([&] {
              read_layer(*stream_, dir, written, 0, 1, {{"w", tensor({0, 0})}});
            }).find("truncated"),
            std::string::npos);
  EXPECT_NE(message([] { find_checkpoint("/nonexistent/h2"); }).find("does not exist"), std::string::npos);
  EXPECT_NE(message([&] { find_checkpoint(root_.parent_path().string()); }).find("neither a checkpoint"),
            std::string::npos);
}

}  // namespace
}  // namespace h2::heteropp
