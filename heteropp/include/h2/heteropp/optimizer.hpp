// AdamW over one stage's parameters, with its two moments on the stage's device. Weight decay
// applies to matrices only (not to norms and biases); a global-norm clip is folded into the update
// as a gradient scale, so the gradients are read once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "h2/heteropp/gpt.hpp"
#include "h2/ops.hpp"

namespace h2::heteropp {

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;

  // The operator's options for update `step` of tensors with (`decay`) or without weight decay.
  ops::AdamWOptions options(double lr, bool decay, double grad_scale, int64_t step) const {
    return {.lr = lr,
            .beta1 = beta1,
            .beta2 = beta2,
            .eps = eps,
            .weight_decay = decay ? weight_decay : 0.0,
            .grad_scale = grad_scale,
            .step = step};
  }
};

class AdamW {
 public:
  // Zero moments for every parameter of `model` that `updates` selects (all, by default: another
  // optimizer updates the rest), enqueued on `stream`; both must outlive this.
  AdamW(GptStage& model, Stream& stream, const AdamWSettings& settings,
        const std::function<bool(size_t parameter)>& updates = {});

  // Update number `step` (1 for the first; bias correction uses it) at learning rate `lr`, with the
  // gradients multiplied by `grad_scale` first. Enqueued on the stream; does not wait.
  void step(double lr, double grad_scale, int64_t step);

  // The moments of parameter i (model.parameters()[i]), for checkpoints; empty for one it does not update.
  Tensor& exp_avg(size_t i) { return exp_avg_[i]; }
  Tensor& exp_avg_sq(size_t i) { return exp_avg_sq_[i]; }
  // The bytes its state takes on the device: the moments, and the f32 masters of 16-bit weights.
  size_t state_bytes() const;

 private:
  GptStage& model_;
  Stream& stream_;
  AdamWSettings settings_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace h2::heteropp
