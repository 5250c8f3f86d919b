#include "h2/heteropp/model_profiler.hpp"

#include <algorithm>
#include <chrono>

#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"
#include "h2/ops.hpp"

namespace h2::heteropp {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double milliseconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Median forward and backward time of `stage` on `input` over the timed iterations, after warm-up.
nlohmann::json time_stage(const ProfileSettings& settings, GptStage& stage, Stream& stream, const Tensor& input,
                          const Tensor& targets, const Tensor& grad_output, int micro_batch) {
  std::vector<double> forward_ms, backward_ms;
  for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    stage.forward(i, input, targets);
    stream.synchronize();
    const Clock::time_point middle = Clock::now();
    stage.backward(i, grad_output);
    stream.synchronize();
    const Clock::time_point end = Clock::now();
    if (i < settings.warmup) continue;
    forward_ms.push_back(milliseconds(start, middle));
    backward_ms.push_back(milliseconds(middle, end));
  }
  return {{"micro_batch", micro_batch}, {"forward_ms", median(forward_ms)}, {"backward_ms", median(backward_ms)}};
}

// What a step does per parameter after the backward passes: zero the gradients (before the next
// step), their norm, AdamW. Measured over one layer's parameters.
double optimizer_ns_per_parameter(const ProfileSettings& settings, GptStage& layer, Stream& stream) {
  AdamW optimizer(layer, stream, {});
  std::vector<Tensor> grads;
  int64_t parameters = 0;
  for (const Parameter& p : layer.parameters()) {
    grads.push_back(p.grad);
    parameters += p.value.numel();
  }
  const Tensor norm = Tensor::empty(stream.device(), {1}, DType::f32);
  std::vector<double> ms;
  for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    ops::grad_norm(stream, grads, norm);
    optimizer.step(1e-4, 1.0, i + 1);
    layer.zero_grads();
    stream.synchronize();
    if (i >= settings.warmup) ms.push_back(milliseconds(start, Clock::now()));
  }
  return median(ms) * 1e6 / static_cast<double>(parameters);
}

}  // namespace

nlohmann::json profile_device(const heteroauto::Model& model, const Device& device, Stream& stream,
                              const ProfileSettings& settings, const std::function<void()>& barrier) {
  const auto wait = [&] {
    if (barrier) barrier();
  };
  const GptConfig config = GptConfig::from_model(model, 1);
  const int last = config.layers;
  GptStage layer(config, 0, 1, false, false, device, stream);
  GptStage embedding(config, 0, 0, true, false, device, stream);
  GptStage head(config, last, last, false, true, device, stream);
  nlohmann::json result = {{"device", device.label()}};
  for (int b : settings.micro_batches) {
    const int64_t batch = b;
    std::vector<double> token_values(static_cast<size_t>(batch * model.seq_len));
    for (size_t i = 0; i < token_values.size(); ++i)
      token_values[i] = static_cast<double>((i * 7919) % static_cast<size_t>(model.vocab));
    const Tensor tokens = Tensor::from_host(stream, token_values, {batch, model.seq_len}, DType::i64);
    // Inputs of the scale the model sees: the embedding's output, and the loss's gradient through
    // the head.
    const Tensor x = embedding.forward(-1, tokens);
    head.forward(-1, x, tokens);
    const Tensor dy = head.backward(-1, {}, 1.0 / static_cast<double>(batch * model.seq_len));
    embedding.backward(-1, dy);
    stream.synchronize();
    wait();
    result["layer"].push_back(time_stage(settings, layer, stream, x, {}, dy, b));
    wait();
    result["embedding"].push_back(time_stage(settings, embedding, stream, tokens, {}, dy, b));
    wait();
    result["head"].push_back(time_stage(settings, head, stream, x, tokens, {}, b));
  }
  wait();
  result["optimizer_ns_per_parameter"] = optimizer_ns_per_parameter(settings, layer, stream);
  return result;
}

nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices) {
  nlohmann::json mean = devices.front();
  mean.erase("device");
  const double n = static_cast<double>(devices.size());
  for (const char* part : {"layer", "embedding", "head"})
    for (size_t i = 0; i < mean[part].size(); ++i)
      for (const char* field : {"forward_ms", "backward_ms"}) {
        double sum = 0;
        for (const nlohmann::json& d : devices) sum += d[part][i][field].get<double>();
        mean[part][i][field] = sum / n;
      }
  double sum = 0;
  for (const nlohmann::json& d : devices) sum += d["optimizer_ns_per_parameter"].get<double>();
  mean["optimizer_ns_per_parameter"] = sum / n;
  return mean;
}

}  // namespace h2::heteropp
