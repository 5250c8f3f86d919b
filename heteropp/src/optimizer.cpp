#include "h2/heteropp/optimizer.hpp"

namespace h2::heteropp {

AdamW::AdamW(GptStage& model, Stream& stream, const AdamWSettings& settings,
             const std::function<bool(size_t parameter)>& updates)
    : model_(model), stream_(stream), settings_(settings) {
  for (size_t i = 0; i < model_.parameters().size(); ++i) {
    const Parameter& p = model_.parameters()[i];
    if (updates && !updates(i)) {
      exp_avg_.emplace_back();
      exp_avg_sq_.emplace_back();
      continue;
    }
    exp_avg_.push_back(Tensor::empty(stream_, p.master.shape(), DType::f32));
    exp_avg_sq_.push_back(Tensor::empty(stream_, p.master.shape(), DType::f32));
    ops::fill(stream_, exp_avg_.back(), 0);
    ops::fill(stream_, exp_avg_sq_.back(), 0);
  }
}

size_t AdamW::state_bytes() const {
  size_t bytes = 0;
  for (size_t i = 0; i < exp_avg_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    const Parameter& p = model_.parameters()[i];
    // The moments, and an f32 master kept beside a 16-bit weight.
    const size_t tensors = p.value.same_view(p.master) ? 2 : 3;
    bytes += tensors * static_cast<size_t>(exp_avg_[i].numel()) * sizeof(float);
  }
  return bytes;
}

void AdamW::step(double lr, double grad_scale, int64_t step) {
  // Two calls, one per weight-decay class, each over all of its tensors at once. The f32 masters
  // are updated; a 16-bit copy, where the model has one, receives the result rounded.
  std::vector<Tensor> params[2], grads[2], m[2], v[2], copies[2];
  for (size_t i = 0; i < model_.parameters().size(); ++i) {
    const Parameter& p = model_.parameters()[i];
    if (!exp_avg_[i].defined()) continue;  // updated elsewhere
    const int decay = p.master.rank() >= 2 ? 1 : 0;
    params[decay].push_back(p.master);
    grads[decay].push_back(p.grad);
    m[decay].push_back(exp_avg_[i]);
    v[decay].push_back(exp_avg_sq_[i]);
    copies[decay].push_back(p.value.same_view(p.master) ? Tensor() : p.value);
  }
  for (int decay : {0, 1}) {
    if (params[decay].empty()) continue;
    ops::adamw(stream_, params[decay], grads[decay], m[decay], v[decay], copies[decay],
               settings_.options(lr, decay == 1, grad_scale, step));
  }
}

}  // namespace h2::heteropp
