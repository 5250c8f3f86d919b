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

// A part's time from its repeats: their mean without the fastest and the slowest tenth. Not the
// median: where a machine's speed wanders between levels for seconds at a time (shared or
// frequency-scaled cores; on the 2-core machine this was built on, one layer's repeats fell into two
// groups 1.6x apart), the median jumps to whichever level holds half the repeats, while a training
// step, seconds long, averages over the levels as the mean does. The trimming drops lone outliers.
double typical(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t cut = values.size() / 10;
  double sum = 0;
  for (size_t i = cut; i < values.size() - cut; ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 2 * cut);
}

// How far typical(values) may be off, relative to it: the standard error of a mean of the repeats.
double relative_standard_error(const std::vector<double>& values) {
  const double n = static_cast<double>(values.size());
  if (values.size() < 2) return 0;
  double mean = 0, squares = 0;
  for (double v : values) mean += v / n;
  for (double v : values) squares += (v - mean) * (v - mean);
  return mean > 0 ? std::sqrt(squares / (n - 1)) / std::sqrt(n) / mean : 0;
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
  return {{"micro_batch", micro_batch}, {"forward_ms", typical(t.forward_ms)}, {"backward_ms", typical(t.backward_ms)}};
}

// One micro-batch size's inputs, of the scale the model sees (the embedding's output, and the loss's
// gradient through the head), and its parts' times.
struct SizeRun {
  int micro_batch = 1;
  Tensor tokens, x, dy;
  PartTimes layer, embedding, head;
};

// What a step does per parameter after the backward passes: zero the gradients (before the next
// step), their norm, AdamW; and of it the norm and AdamW alone, which the distributed optimizer runs
// on its share of the parameters only. Measured over one layer's parameters.
struct OptimizerTimes {
  double all_ns = 0, update_ns = 0;  // per parameter
};

OptimizerTimes optimizer_ns_per_parameter(const ProfileSettings& settings, GptStage& layer, Stream& stream) {
  AdamW optimizer(layer, stream, {});
  std::vector<Tensor> grads;
  int64_t parameters = 0;
  for (const Parameter& p : layer.parameters()) {
    grads.push_back(p.grad);
    parameters += p.value.numel();
  }
  const Tensor norm = Tensor::empty(stream.device(), {1}, DType::f32);
  std::vector<double> all_ms, update_ms;
  for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    ops::grad_norm(stream, grads, norm);
    optimizer.step(1e-4, 1.0, i + 1);
    stream.synchronize();
    const Clock::time_point updated = Clock::now();
    layer.zero_grads();
    stream.synchronize();
    if (i < settings.warmup) continue;
    all_ms.push_back(milliseconds(start, Clock::now()));
    update_ms.push_back(milliseconds(start, updated));
  }
  const double per_parameter = 1e6 / static_cast<double>(parameters);
  const double all = typical(all_ms) * per_parameter;
  return {all, std::min(all, typical(update_ms) * per_parameter)};
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
                              const ProfileSettings& settings, const ProfileTurns& turns) {
  // Runs `part` in this device's turn, waiting through the other groups' turns.
  const auto in_turn = [&](const std::function<void()>& part) {
    for (int t = 0; t < turns.turns; ++t) {
      if (turns.barrier) turns.barrier();
      if (t == turns.turn) part();
    }
  };
  const GptConfig config = GptConfig::from_model(model, 1);
  const int last = config.layers;
  GptStage layer(config, 0, 1, false, false, device, stream);
  GptStage embedding(config, 0, 0, true, false, device, stream);
  GptStage head(config, last, last, false, true, device, stream);
  nlohmann::json result = {{"device", device.label()}};
  std::vector<SizeRun> runs;
  for (int b : settings.micro_batches) {
    SizeRun& run = runs.emplace_back();
    run.micro_batch = b;
    const int64_t batch = b;
    std::vector<double> token_values(static_cast<size_t>(batch * model.seq_len));
    for (size_t i = 0; i < token_values.size(); ++i)
      token_values[i] = static_cast<double>((i * 7919) % static_cast<size_t>(model.vocab));
    run.tokens = Tensor::from_host(stream, token_values, {batch, model.seq_len}, DType::i64);
    run.x = embedding.forward(-1, run.tokens);
    head.forward(-1, run.x, run.tokens);
    run.dy = head.backward(-1, {}, 1.0 / static_cast<double>(batch * model.seq_len));
    embedding.backward(-1, run.dy);
  }
  stream.synchronize();
  // Each round measures every part at every size once: whatever slows the machine for a while slows
  // them all alike instead of one part's or one size's every repeat, and shows in the spread.
  for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
    const bool timed = i >= settings.warmup;
    for (SizeRun& r : runs) {
      in_turn([&] { time_once(layer, stream, i, r.x, {}, r.dy, timed ? &r.layer : nullptr); });
      in_turn([&] { time_once(embedding, stream, i, r.tokens, {}, r.dy, timed ? &r.embedding : nullptr); });
      in_turn([&] { time_once(head, stream, i, r.x, r.tokens, {}, timed ? &r.head : nullptr); });
    }
  }
  double spread = 0, standard_error = 0;
  for (const SizeRun& r : runs) {
    result["layer"].push_back(point(r.layer, r.micro_batch));
    result["embedding"].push_back(point(r.embedding, r.micro_batch));
    result["head"].push_back(point(r.head, r.micro_batch));
    std::vector<double> layer_ms;
    for (size_t i = 0; i < r.layer.forward_ms.size(); ++i)
      layer_ms.push_back(r.layer.forward_ms[i] + r.layer.backward_ms[i]);
    spread = std::max(spread, relative_spread(layer_ms));
    standard_error = std::max(standard_error, relative_standard_error(layer_ms));
  }
  result["standard_error"] = standard_error;
  result["spread"] = spread;
  result["repeats"] = settings.iterations;
  in_turn([&] {
    const OptimizerTimes optimizer = optimizer_ns_per_parameter(settings, layer, stream);
    result["optimizer_ns_per_parameter"] = optimizer.all_ns;
    result["update_ns_per_parameter"] = optimizer.update_ns;
  });
  if (turns.barrier) turns.barrier();  // the last group's turn ends before any device reports
  return result;
}

nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices) {
  nlohmann::json mean = devices.front();
  mean.erase("device");
  mean.erase("standard_error");
  const double n = static_cast<double>(devices.size());
  for (const char* part : {"layer", "embedding", "head"})
    for (size_t i = 0; i < mean[part].size(); ++i)
      for (const char* field : {"forward_ms", "backward_ms"}) {
        double sum = 0;
        for (const nlohmann::json& d : devices) sum += d[part][i][field].get<double>();
        mean[part][i][field] = sum / n;
      }
  for (const char* field : {"optimizer_ns_per_parameter", "update_ns_per_parameter"}) {
    double sum = 0;
    for (const nlohmann::json& d : devices) sum += d[field].get<double>();
    mean[field] = sum / n;
  }
  // The type's spread: the widest of its devices' own. Its times' uncertainty: the widest standard
  // error of a device's mean, or half the range of its devices' times, which for devices of one type
  // should agree.
  double spread = 0, error = 0, between = 0;
  for (const nlohmann::json& d : devices) {
    spread = std::max(spread, d["spread"].get<double>());
    error = std::max(error, d.value("standard_error", 0.0));
  }
  for (size_t i = 0; i < mean["layer"].size(); ++i) {
    std::vector<double> layer_ms;
    for (const nlohmann::json& d : devices)
      layer_ms.push_back(d["layer"][i]["forward_ms"].get<double>() + d["layer"][i]["backward_ms"].get<double>());
    const auto [low, high] = std::minmax_element(layer_ms.begin(), layer_ms.end());
    between = std::max(between, (*high - *low) / median(layer_ms));
  }
  mean["spread"] = spread;
  mean["uncertainty"] = std::max(error, between / 2);
  return mean;
}

}  // namespace h2::heteropp
