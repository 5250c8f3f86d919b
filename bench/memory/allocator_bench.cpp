// The core's caching allocator against the plugin's own allocation calls, in one run:
//  1. allocate + free of one buffer of 4 KiB to 64 MiB: through the cache (Device::allocate(bytes,
//     stream), what Tensor::empty(stream, ...) does) and through mem_alloc + mem_free directly;
//  2. a training step of a GPT stage (every layer, embedding and head: forward, backward and a
//     synchronize) with the cache and with H2_ALLOCATOR=plugin (every tensor a plugin allocation,
//     stream-ordered where the plugin has mem_alloc_async), counting plugin allocations per step.
// Prints Google Benchmark's table, then the ratios; --json FILE writes them for programs.
//   allocator_bench [--plugin cpu-reference] [--model examples/models/gpt-tiny.json] [--steps 5]
//                   [--json FILE] [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "h2/h2.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/gpt.hpp"

namespace {

std::string plugin_name = "cpu-reference";

// The plugin, loaded with the allocator H2_ALLOCATOR chooses: a new Runtime after the last one is
// gone loads the plugin again and reads the variable again.
struct Fixture {
  explicit Fixture(const char* allocator) : env(allocator) {}
  struct Env {
    explicit Env(const char* allocator) { setenv("H2_ALLOCATOR", allocator, 1); }
  } env;
  h2::Runtime runtime{h2::RuntimeOptions{.plugins = {plugin_name}}};
  h2::Device device = runtime.device(plugin_name, 0);
  h2::Stream stream = device.create_stream();
};

std::optional<Fixture> current;
std::string current_allocator;

Fixture& fixture(const char* allocator) {
  if (!current || current_allocator != allocator) {
    current.reset();
    current.emplace(allocator);
    current_allocator = allocator;
  }
  return *current;
}

void BM_CachedAllocateFree(benchmark::State& state) {
  Fixture& f = fixture("caching");
  const auto bytes = static_cast<size_t>(state.range(0));
  f.device.allocate(bytes, f.stream);  // the first one reaches the plugin; measure the rest
  for (auto _ : state) {
    h2::DeviceBuffer buffer = f.device.allocate(bytes, f.stream);
    benchmark::DoNotOptimize(buffer.data());
  }
}

void BM_PluginAllocFree(benchmark::State& state) {
  Fixture& f = fixture("caching");
  const auto bytes = static_cast<size_t>(state.range(0));
  const H2_PluginApi& api = f.device.plugin_api();
  for (auto _ : state) {
    void* ptr = nullptr;
    if (api.mem_alloc(f.device.index(), bytes, &ptr) != H2_STATUS_OK ||
        api.mem_free(f.device.index(), ptr) != H2_STATUS_OK)
      state.SkipWithError(api.last_error());
    benchmark::DoNotOptimize(ptr);
  }
}

BENCHMARK(BM_CachedAllocateFree)->RangeMultiplier(16)->Range(4 << 10, 64 << 20)->UseRealTime();
BENCHMARK(BM_PluginAllocFree)->RangeMultiplier(16)->Range(4 << 10, 64 << 20)->UseRealTime();

class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;  // per allocate + free
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const double scale = run.time_unit == benchmark::kMicrosecond   ? 1e3
                           : run.time_unit == benchmark::kMillisecond ? 1e6
                                                                      : 1.0;
      ns[run.benchmark_name()] = run.GetAdjustedRealTime() * scale;
    }
  }
};

struct StepResult {
  double seconds = 0;               // median step
  double plugin_allocations = 0;    // per step after the first
  double peak_allocated_bytes = 0;  // of the last step
  double peak_reserved_bytes = 0;
};

// Forward and backward of one micro-batch through every layer, `steps` times after one warm-up step.
StepResult gpt_steps(const h2::heteroauto::Model& model, const char* allocator, int steps) {
  current.reset();
  Fixture f(allocator);
  const h2::heteropp::GptConfig config = h2::heteropp::GptConfig::from_model(model, 1);
  h2::heteropp::GptStage stage(config, 0, config.layers, true, true, f.device, f.stream, {});
  const int64_t batch = model.micro_batch_sizes.empty() ? 1 : model.micro_batch_sizes.back();
  std::vector<double> tokens(static_cast<size_t>(batch * config.seq_len));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<double>((i * 7 + 1) % config.vocab);
  const h2::Tensor input = h2::Tensor::from_host(f.stream, tokens, {batch, config.seq_len}, h2::DType::i64);
  std::vector<double> seconds;
  StepResult result;
  for (int step = 0; step <= steps; ++step) {
    h2::reset_peak_memory_stats(f.device);
    const uint64_t before = h2::memory_stats(f.device).plugin_allocations;
    const auto start = std::chrono::steady_clock::now();
    stage.zero_grads();
    stage.forward(0, input, input);
    stage.backward(0, {}, 1.0 / static_cast<double>(tokens.size()));
    f.stream.synchronize();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const h2::MemoryStats stats = h2::memory_stats(f.device);
    if (step == 0) continue;  // warm-up: the cache fills
    seconds.push_back(elapsed);
    result.plugin_allocations += static_cast<double>(stats.plugin_allocations - before) / steps;
    result.peak_allocated_bytes = static_cast<double>(stats.peak_allocated_bytes);
    result.peak_reserved_bytes = static_cast<double>(stats.peak_reserved_bytes);
  }
  std::sort(seconds.begin(), seconds.end());
  result.seconds = seconds[seconds.size() / 2];
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, model_path = "examples/models/gpt-tiny.json";
  int steps = 5;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--plugin" && i + 1 < argc) {
      plugin_name = argv[++i];
    } else if (arg == "--model" && i + 1 < argc) {
      model_path = argv[++i];
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  try {
    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);
    auto ns = [&](const std::string& name, int64_t bytes) {
      const std::string key = name + "/" + std::to_string(bytes) + "/real_time";
      auto median = collector.ns.find(key + "_median");
      return median != collector.ns.end() ? median->second : collector.ns[key];
    };

    const h2::heteroauto::Model model = h2::heteroauto::load_model(model_path);
    const StepResult cached = gpt_steps(model, "caching", steps);
    const StepResult uncached = gpt_steps(model, "plugin", steps);
    current.reset();

    nlohmann::ordered_json out = {{"benchmark", "allocator"}, {"plugin", plugin_name}};
    std::printf("\nallocate + free of one buffer on %s:0 (ns; goals: cache >= 20x faster, < 100 ns small)\n",
                plugin_name.c_str());
    std::printf("  %10s %14s %14s %10s\n", "bytes", "cache", "mem_alloc+free", "speed-up");
    for (int64_t bytes :
         {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
      const double cache = ns("BM_CachedAllocateFree", bytes), plugin = ns("BM_PluginAllocFree", bytes);
      std::printf("  %10lld %14.1f %14.1f %9.1fx\n", static_cast<long long>(bytes), cache, plugin, plugin / cache);
      out["allocate_free"].push_back({{"bytes", bytes}, {"cache_ns", cache}, {"plugin_ns", plugin}});
    }
    std::printf("\nGPT stage step (%s, %d layers, forward + backward + synchronize), median of %d steps\n",
                model.name.c_str(), model.layers, steps);
    std::printf("  %-34s %12s %12s\n", "", "caching", "plugin");
    std::printf("  %-34s %12.2f %12.2f\n", "step (ms)", cached.seconds * 1e3, uncached.seconds * 1e3);
    std::printf("  %-34s %12.1f %12.1f\n", "plugin allocations per step", cached.plugin_allocations,
                uncached.plugin_allocations);
    std::printf("  %-34s %12.2f %12.2f\n", "peak allocated (MiB)", cached.peak_allocated_bytes / 1048576,
                uncached.peak_allocated_bytes / 1048576);
    std::printf("  %-34s %12.2f %12.2f\n", "peak reserved (MiB)", cached.peak_reserved_bytes / 1048576,
                uncached.peak_reserved_bytes / 1048576);
    std::printf("  %-34s %12.3f\n", "step time caching / plugin", cached.seconds / uncached.seconds);
    for (const auto& [name, r] : {std::pair{"caching", cached}, std::pair{"plugin", uncached}})
      out["gpt_step"][name] = {{"step_s", r.seconds},
                               {"plugin_allocations_per_step", r.plugin_allocations},
                               {"peak_allocated_bytes", r.peak_allocated_bytes},
                               {"peak_reserved_bytes", r.peak_reserved_bytes}};
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    current.reset();
    std::cerr << "allocator_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
