// AdamW over this rank's slices of the gradient sums (GradientSync's sharded mode: ZeRO-1, Megatron's
// distributed optimizer). Each slice holds 1/n of a bucket's elements, n the ranks that sum it (one
// per replica, whatever their tensor-parallel degrees), so the moments kept here are 1/n of what
// AdamW would keep. A step updates the slice of the f32 masters, then the group gathers the whole
// masters back (every rank needs them for its forward pass) and the 16-bit copies are rounded from
// them. Parameters whose layers only one rank holds stay with AdamW.
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "gradient_sync.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"

namespace h2::heteropp {

class ShardedAdamW {
 public:
  // Zero moments for every slice of `sync` (which must be sharded), enqueued on `stream`. All must
  // outlive this.
  // The gathers of the masters go into `timeline` ("allgather masters": they follow the optimizer,
  // exposed).
  ShardedAdamW(GptStage& model, GradientSync& sync, Stream& stream, Timeline& timeline, const AdamWSettings& settings);

  // Update number `step` at learning rate `lr`, gradients multiplied by `grad_scale` first; then the
  // masters are whole again on every holder and the model's 16-bit copies follow them. Enqueued on
  // the stream; collective over each slice's group, in the global order.
  void step(double lr, double grad_scale, int64_t step);

  // The slices' summed gradients: all of them (to unscale), and those that enter the global norm.
  std::vector<Tensor> gradients() const;
  std::vector<Tensor> counted_gradients() const;
  // The bytes its moments take on the device.
  size_t state_bytes() const;

  // Parameter index -> its whole moments (exp_avg, exp_avg_sq: this rank's tensor-parallel shard of
  // them, the master's shape), for every parameter the slices hold: gathered from the groups, for a
  // checkpoint. Collective over each slice's group, in the global order.
  using Moments = std::map<size_t, std::pair<Tensor, Tensor>>;
  Moments gather_moments();
  // Moment tensors of the masters' shapes for every parameter the slices hold, to read a checkpoint
  // into; then scatter_moments keeps this rank's slices of them.
  Moments empty_moments() const;
  void scatter_moments(const Moments& whole);

 private:
  // The parts' views of one tensor per parameter (the masters, or whole moments).
  std::vector<WeightedView> views(const GradientSync::Slice& slice, const std::function<Tensor(size_t)>& tensor) const;

  GptStage& model_;
  GradientSync& sync_;
  Stream& stream_;
  Timeline& timeline_;
  AdamWSettings settings_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;  // per slice, f32 [slice.size]
};

}  // namespace h2::heteropp
