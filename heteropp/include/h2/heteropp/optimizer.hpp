// AdamW over one stage's parameters, with its two moments on the stage's device. Weight decay
// applies to matrices only (not to norms and biases); a global-norm clip is folded into the update
// as a gradient scale, so the gradients are read once.
#pragma once

#include <cstdint>
#include <vector>

#include "h2/heteropp/gpt.hpp"

namespace h2::heteropp {

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // Zero moments for every parameter of `model`, enqueued on `stream`; both must outlive this.
  AdamW(GptStage& model, Stream& stream, const AdamWSettings& settings);

  // Update number `step` (1 for the first; bias correction uses it) at learning rate `lr`, with the
  // gradients multiplied by `grad_scale` first. Enqueued on the stream; does not wait.
  void step(double lr, double grad_scale, int64_t step);

  // The moments of parameter i (model.parameters()[i]), for checkpoints.
  Tensor& exp_avg(size_t i) { return exp_avg_[i]; }
  Tensor& exp_avg_sq(size_t i) { return exp_avg_sq_[i]; }

 private:
  GptStage& model_;
  Stream& stream_;
  AdamWSettings settings_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace h2::heteropp
