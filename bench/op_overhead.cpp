// What libh2core adds to a tiny operator call. Three ways to fill a one-element tensor, measured in
// one run: through the core's ops::fill (validation, descriptors, the plugin slot), through the
// plugin's function pointer directly with a hand-built argument struct, and through LibTorch's
// dispatcher (at::fill_) on the CPU. The first two run on the same cpu-reference stream, so their
// difference is the core's cost; every 256 calls the stream is synchronised in both.
//
// Each is measured twice: with blocking streams (H2_CPU_REFERENCE_BLOCKING=1, the work runs on the
// calling thread, so the difference is the core's host-side cost alone) and with the default worker
// streams (the work is handed to a worker thread, whose wake-ups on two cores add noise).
//
// Prints Google Benchmark's table, then the ratios; --json FILE also writes them for programs.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/per_call_reporter.hpp"
#include "h2/h2.hpp"

namespace {

constexpr int kBatch = 256;

struct Fixture {
  explicit Fixture(bool blocking) : blocking_env(blocking) {}
  struct Env {
    explicit Env(bool blocking) { setenv("H2_CPU_REFERENCE_BLOCKING", blocking ? "1" : "0", 1); }
  } blocking_env;
  h2::Runtime runtime{h2::RuntimeOptions{.plugins = {"cpu-reference"}}};
  h2::Device device = runtime.device("cpu-reference", 0);
  h2::Stream stream = device.create_stream();
  h2::Tensor y = h2::Tensor::empty(device, {1}, h2::DType::f32);
  const H2_OpTable* ops = nullptr;

  void init() {
    // The plugin's own table, as a program that bypassed the core would use it (dlopen of a loaded
    // library returns the instance the core initialised).
    const auto& info = runtime.plugins().at(0);
    void* library = dlopen(info.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (library == nullptr) throw std::runtime_error("cpu-reference is not loaded");
    auto get_api = reinterpret_cast<H2_GetApiFn>(dlsym(library, H2_PLUGIN_ENTRY_POINT));
    ops = get_api(H2_ABI_MAJOR)->op_table;
  }
};

// The fixture for a mode; switching modes restarts the plugin with the other setting. main() drops
// it before returning: H2 objects must not outlive main, when plugins' own statics go away.
std::optional<Fixture> current;
bool current_blocking = false;

Fixture& fixture(bool blocking) {
  if (!current || current_blocking != blocking) {
    current.reset();
    current.emplace(blocking);
    current->init();
    current_blocking = blocking;
  }
  return *current;
}

void BM_CoreOpsFill(benchmark::State& state) {
  Fixture& f = fixture(state.range(0) == 1);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) h2::ops::fill(f.stream, f.y, 1.0);
    f.stream.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_PluginSlotFill(benchmark::State& state) {
  Fixture& f = fixture(state.range(0) == 1);
  H2_FillArgs args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.y = f.y.descriptor();
  args.value = 1.0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i)
      if (f.ops->fill(f.stream.native(), &args) != H2_STATUS_OK) state.SkipWithError("fill failed");
    f.stream.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_LibTorchDispatcherFill(benchmark::State& state) {
  at::Tensor t = at::empty({1}, at::kFloat);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) t.fill_(1.0);
    benchmark::DoNotOptimize(t.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// range(0): 1 = blocking streams, 0 = worker streams.
BENCHMARK(BM_CoreOpsFill)->Arg(1)->UseRealTime();
BENCHMARK(BM_PluginSlotFill)->Arg(1)->UseRealTime();
BENCHMARK(BM_LibTorchDispatcherFill)->UseRealTime();
BENCHMARK(BM_CoreOpsFill)->Arg(0)->UseRealTime();
BENCHMARK(BM_PluginSlotFill)->Arg(0)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  if (!h2::bench::initialize(argc, argv, json_path)) return 2;
  h2::bench::PerCallReporter collector(kBatch);
  benchmark::RunSpecifiedBenchmarks(&collector);
  current.reset();

  auto ns = [&](const std::string& name) { return collector.ns(name); };
  const double core = ns("BM_CoreOpsFill/1/real_time"), direct = ns("BM_PluginSlotFill/1/real_time");
  const double core_async = ns("BM_CoreOpsFill/0/real_time"), direct_async = ns("BM_PluginSlotFill/0/real_time");
  const double torch = ns("BM_LibTorchDispatcherFill/real_time");
  std::cout << "\nnanoseconds per tiny operator call (one-element fill; medians of the repetitions)\n";
  std::printf("  %-46s %10s %10s\n", "", "blocking", "worker");
  std::printf("  %-46s %10.1f %10.1f\n", "libh2core ops::fill", core, core_async);
  std::printf("  %-46s %10.1f %10.1f\n", "cpu-reference fill slot called directly", direct, direct_async);
  std::printf("  %-46s %10.1f %10.1f\n", "core overhead (core - direct), goal < 100 ns", core - direct,
              core_async - direct_async);
  std::printf("  %-46s %10.2f %10.2f\n", "core / direct", core / direct, core_async / direct_async);
  std::printf("  %-46s %10.1f\n", "LibTorch dispatcher at::fill_ (CPU)", torch);
  std::printf("  %-46s %10.2f\n", "core overhead / LibTorch dispatch", (core - direct) / torch);
  if (!json_path.empty()) {
    nlohmann::ordered_json out = {
        {"benchmark", "op_overhead"},
        {"blocking", {{"core_ns", core}, {"direct_ns", direct}, {"core_overhead_ns", core - direct}}},
        {"worker",
         {{"core_ns", core_async}, {"direct_ns", direct_async}, {"core_overhead_ns", core_async - direct_async}}},
        {"libtorch_dispatch_ns", torch}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  return 0;
}
