#include "h2/heteropp/model_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

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

// The forward and backward times of one part (a layer, the embedding, the head) over the repeats.
struct PartTimes {
  std::vector<double> forward_ms, backward_ms;
};

// One forward and backward of `stage` on `input`, timed into `into` unless null (warm-up).
void time_once(GptStage& stage, Stream& stream, int iteration, const Tensor& input, const Tensor& targets,
               const Tensor& grad_output, PartTimes* into) {
  stream.synchronize();
  const Clock::time_point start = Clock::now();
  stage.forward(iteration, input, targets);
  stream.synchronize();
  const Clock::time_point middle = Clock::now();
  stage.backward(iteration, grad_output);
  stream.synchronize();
  const Clock::time_point end = Clock::now();
  if (into == nullptr) return;
  into->forward_ms.push_back(milliseconds(start, middle));
  into->backward_ms.push_back(milliseconds(middle, end));
}

nlohmann::json point(const PartTimes& t, int micro_batch) {
  return {{"micro_batch", micro_batch}, {"forward_ms", median(t.forward_ms)}, {"backward_ms", median(t.backward_ms)}};
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

double relative_spread(std::vector<double> values) {
  if (values.size() < 2) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double middle = values[n / 2];
  return middle > 0 ? (values[(3 * n) / 4] - values[n / 4]) / middle : 0;
}

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
  double spread = 0;
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
    // The parts take turns, one repeat each per round: whatever else slows the machine for a while
    // slows all three alike instead of one part's every repeat, and shows in the spread.
    PartTimes layer_times, embedding_times, head_times;
    for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
      const bool timed = i >= settings.warmup;
      wait();
      time_once(layer, stream, i, x, {}, dy, timed ? &layer_times : nullptr);
      wait();
      time_once(embedding, stream, i, tokens, {}, dy, timed ? &embedding_times : nullptr);
      wait();
      time_once(head, stream, i, x, tokens, {}, timed ? &head_times : nullptr);
    }
    result["layer"].push_back(point(layer_times, b));
    result["embedding"].push_back(point(embedding_times, b));
    result["head"].push_back(point(head_times, b));
    std::vector<double> layer_ms;
    for (size_t i = 0; i < layer_times.forward_ms.size(); ++i)
      layer_ms.push_back(layer_times.forward_ms[i] + layer_times.backward_ms[i]);
    spread = std::max(spread, relative_spread(layer_ms));
  }
  result["spread"] = spread;
  result["repeats"] = settings.iterations;
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
  // The type's spread: the widest of its devices' own. Its medians' uncertainty: a median of n
  // repeats is uncertain by about 0.93 x IQR / sqrt(n) (1.25 sigma / sqrt(n), sigma = IQR / 1.35), or
  // by half the range of its devices' medians, which for devices of one type should agree.
  double spread = 0, between = 0;
  for (const nlohmann::json& d : devices) spread = std::max(spread, d["spread"].get<double>());
  for (size_t i = 0; i < mean["layer"].size(); ++i) {
    std::vector<double> layer_ms;
    for (const nlohmann::json& d : devices)
      layer_ms.push_back(d["layer"][i]["forward_ms"].get<double>() + d["layer"][i]["backward_ms"].get<double>());
    const auto [low, high] = std::minmax_element(layer_ms.begin(), layer_ms.end());
    between = std::max(between, (*high - *low) / median(layer_ms));
  }
  const double repeats = std::max(1, devices.front()["repeats"].get<int>());
  mean["spread"] = spread;
  mean["uncertainty"] = std::max(0.93 * spread / std::sqrt(repeats), between / 2);
  return mean;
}

}  // namespace h2::heteropp
