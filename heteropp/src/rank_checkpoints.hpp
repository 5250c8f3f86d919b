// A rank's part in HeteroPP's checkpoints (their files and commit protocol: h2/heteropp/checkpoint.hpp).
// A checkpoint holds every layer whole, whatever the plan's tensor parallelism, so that a run resumes
// under another plan: a rank reads its layers whole and keeps its shards; to save, the owner's
// tensor-parallel group gathers each of the owner's layers and the owner writes it. Masters and
// moments sharded over replicas (ShardedAdamW) are gathered whole first, and read whole then sliced
// again, so a checkpoint does not depend on whether the optimizer was sharded.
#pragma once

#include <string>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/checkpoint.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"
#include "sharded_adamw.hpp"

namespace h2::heteropp {

// Throws h2::Error naming the field when `saved` (a checkpoint manifest's model) is of another
// architecture than `model`.
void check_same_architecture(const nlohmann::json& saved, const heteroauto::Model& model,
                             const std::string& checkpoint);

class RankCheckpoints {
 public:
  // `tp_comm`: the rank's stage's tensor-parallel group (invalid without one). `sharded`: the
  // optimizer of the parameters whose moments are sharded over replicas (null without). All must
  // outlive this.
  RankCheckpoints(const Placement& placement, const dicomm::Communicator& world, const dicomm::Communicator& tp_comm,
                  GptStage& model, AdamW& optimizer, ShardedAdamW* sharded, Stream& stream, Timeline& timeline);

  // Reads this rank's layers of the checkpoint in `step_dir` (whose manifest is `manifest`) into the
  // model's masters and the optimizer's moments.
  void load(const std::string& step_dir, const CheckpointState& manifest);
  // Writes step `state.step` under OUT_DIR/checkpoints, keeping the newest `keep`, and returns the
  // committed directory. Collective over the world.
  std::string save(const std::string& out_dir, const CheckpointState& state, int keep);

 private:
  // A layer's state as checkpoints hold it: each parameter's master and AdamW moments, with how this
  // rank's tensors are cut from them.
  struct LayerTensor {
    NamedTensor local;  // this rank's tensor (its shard of a cut parameter)
    Sharding sharding;
    Shape whole_shape;
    bool cut() const { return sharding.sharded() && local.tensor.shape() != whole_shape; }
  };
  // `sharded`: the whole masters and moments of the parameters ShardedAdamW holds (the rest are the
  // model's and AdamW's).
  std::vector<LayerTensor> layer_state(int layer, const ShardedAdamW::State& sharded);
  // The whole tensor from the shards of this rank's tensor-parallel group (every member calls this).
  Tensor gather_whole(const LayerTensor& t);

  const Placement& placement_;
  const dicomm::Communicator& world_;
  const dicomm::Communicator& tp_comm_;
  const StageRole& role_;
  GptStage& model_;
  AdamW& optimizer_;
  ShardedAdamW* sharded_;
  Stream& stream_;
  Timeline& timeline_;
};

}  // namespace h2::heteropp
