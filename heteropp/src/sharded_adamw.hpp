// AdamW over this rank's slices of the gradient sums (GradientSync's sharded mode: ZeRO-1, Megatron's
// distributed optimizer). Each slice holds 1/n of a bucket's elements, n the ranks that sum it (one
// per replica, whatever their tensor-parallel degrees), and this optimizer keeps, for the slice
// alone, AdamW's two moments and, for a 16-bit model, the f32 masters: 1/n of what AdamW would keep.
// A step updates the slice, then the group gathers the whole weights back (every rank needs them for
// its forward pass): into the f32 weights, or, for a 16-bit model, as 16-bit weights, each rank
// rounding its own slice before the gather (Megatron's: half the bytes of gathering f32 masters, and
// the same weights, rounded from the same f32 values); no rank keeps a 16-bit weight's whole f32
// master any more (Parameter::master is undefined there). An f32 model's weights are their
// own masters: the slice is packed from them for the update. Parameters whose layers one rank holds alone stay
// with AdamW.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "gradient_sync.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"

namespace h2::heteropp {

class ShardedAdamW {
 public:
  // Takes each slice's masters from the model's (releasing a 16-bit weight's whole f32 master) and
  // zero moments, enqueued on `stream`. The gathers of the weights go into `timeline` ("allgather
  // weights": they follow the optimizer, exposed). All must outlive this.
  ShardedAdamW(GptStage& model, GradientSync& sync, Stream& stream, Timeline& timeline, const AdamWSettings& settings);

  // Update number `step` at learning rate `lr`, gradients multiplied by `grad_scale` first; then the
  // weights are whole again on every holder. Enqueued on the stream; collective over each slice's
  // group, in the global order.
  void step(double lr, double grad_scale, int64_t step);

  // The slices' summed gradients: all of them (to unscale), and those that enter the global norm.
  std::vector<Tensor> gradients() const;
  std::vector<Tensor> counted_gradients() const;
  // The bytes its state takes on the device (masters and moments of the slices).
  size_t state_bytes() const;

  // A parameter's optimizer state whole (this rank's tensor-parallel shard of it, the gradient's shape),
  // as checkpoints hold it.
  struct Whole {
    Tensor master, exp_avg, exp_avg_sq;
  };
  using State = std::map<size_t, Whole>;  // by parameter index, for every parameter the slices hold
  // Gathered from the groups, for a checkpoint: collective over each slice's group, in the global order.
  State gather_state();
  // Tensors to read a checkpoint into; then scatter_state keeps this rank's slices of them and sets
  // the weights from the masters.
  State empty_state() const;
  void scatter_state(const State& whole);

 private:
  // The slice's parts, as views of one tensor per parameter.
  std::vector<WeightedView> views(const GradientSync::Slice& slice, const std::function<Tensor(size_t)>& tensor) const;
  // Where the gathered weights go: the f32 weight, or the 16-bit one (rounded before the gather).
  Tensor weight(size_t parameter) const;

  // How a 16-bit model's slice travels in the gather: per member of the group, its stretches of the
  // slice that belong to 16-bit weights (narrow) and to f32 ones (wide: the rank-1 parameters, norm
  // weights and biases, carried exactly in a small f32 gather of their own), each at `at` in the
  // member's chunk of its kind; every member's chunk is as long as the longest member's.
  struct GatherLayout {
    struct Run {
      int64_t offset = 0, elements = 0;  // within the member's [begin, begin + size)
      int64_t at = 0;                    // within the member's chunk of its kind
      bool wide = false;
    };
    std::vector<std::vector<Run>> runs;  // by member (index begin / size)
    int64_t narrow = 0, wide = 0;        // chunk elements per member
  };
  GatherLayout gather_layout(const GradientSync::Slice& slice) const;
  // Rounds slice k's updated masters into the 16-bit dtype and gathers every member's into the
  // weights (`weights`: the slice's views of them).
  void gather_sixteen_bit(size_t k, const Tensor& masters, const std::vector<WeightedView>& weights);
  // One gather of updated weights over the slice's group, recorded in the timeline ("allgather
  // weights", with its elements and bytes).
  void allgather_weights(const GradientSync::Slice& slice, const Tensor& mine, const Tensor& all);

  GptStage& model_;
  GradientSync& sync_;
  Stream& stream_;
  Timeline& timeline_;
  AdamWSettings settings_;
  bool keeps_masters_;                                 // a 16-bit model's f32 masters live here
  std::vector<Tensor> master_, exp_avg_, exp_avg_sq_;  // per slice, f32 [slice.size] (master_: if kept)
  std::vector<GatherLayout> gather_layouts_;           // per slice, where masters are kept
};

}  // namespace h2::heteropp
