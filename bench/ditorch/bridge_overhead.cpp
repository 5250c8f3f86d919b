// What DiTorch's bridge adds to an operator call: the same small operators called as LibTorch
// operators on privateuseone (the dispatcher, DiTorch's kernel, LibTorch's tensor and allocator on
// the core's caching allocator) and through h2::ops directly (the output made with
// h2::Tensor::empty), on one cpu-reference device with blocking streams, so the work runs on the
// calling thread and the difference is the bridge's host cost. Every 256 calls both synchronise.
//
// Prints Google Benchmark's table, then per operator the two costs, their difference (goal: < 2 us)
// and their ratio; --json FILE also writes them for programs.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "../common/per_call_reporter.hpp"
#include "h2torch/h2torch.hpp"

namespace {

constexpr int kBatch = 256;
const c10::Device kH2(c10::DeviceType::PrivateUse1, 0);

// The operands of one operator, as LibTorch tensors on the device and as h2::Tensors of their own.
struct Operands {
  explicit Operands(const std::vector<int64_t>& shape)
      : a(torch::randn(shape).to(kH2)), b(torch::randn(shape).to(kH2)), shape(shape.begin(), shape.end()) {
    h2::Stream& s = h2torch::stream(0);
    ha = h2::Tensor::empty(s, this->shape, h2::DType::f32);
    hb = h2::Tensor::empty(s, this->shape, h2::DType::f32);
    h2::ops::fill(s, ha, 0.5);
    h2::ops::fill(s, hb, 0.25);
  }
  torch::Tensor a, b;
  h2::Shape shape;
  h2::Tensor ha, hb;
};

template <typename Bridge, typename Direct>
void measure(benchmark::State& state, Bridge bridge, Direct direct, const std::vector<int64_t>& shape) {
  Operands o(shape);
  h2::Stream& s = h2torch::stream(0);
  const bool through_bridge = state.range(0) == 1;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      if (through_bridge)
        benchmark::DoNotOptimize(bridge(o));
      else
        direct(o, s);
    }
    s.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

h2::Tensor out(const Operands& o, h2::Stream& s, h2::Shape shape) {
  return h2::Tensor::empty(s, std::move(shape), h2::DType::f32);
}

void BM_Add(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return o.a + o.b; },
      [](const Operands& o, h2::Stream& s) { h2::ops::add(s, o.ha, o.hb, out(o, s, o.shape)); }, {64});
}
void BM_MulScalar(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return o.a * 2.0; },
      [](const Operands& o, h2::Stream& s) {
        h2::ops::binary(s, h2::ops::BinaryOp::mul, o.ha, 2.0, out(o, s, o.shape));
      },
      {64});
}
void BM_Mm(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return torch::mm(o.a, o.b); },
      [](const Operands& o, h2::Stream& s) { h2::ops::gemm(s, o.ha, o.hb, out(o, s, o.shape)); }, {16, 16});
}
void BM_Gelu(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return torch::gelu(o.a); },
      [](const Operands& o, h2::Stream& s) { h2::ops::gelu(s, o.ha, out(o, s, o.shape)); }, {64});
}
void BM_Softmax(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return torch::softmax(o.a, -1); },
      [](const Operands& o, h2::Stream& s) { h2::ops::softmax(s, o.ha, out(o, s, o.shape)); }, {8, 8});
}
void BM_SumDim(benchmark::State& state) {
  measure(
      state, [](const Operands& o) { return o.a.sum(-1); },
      [](const Operands& o, h2::Stream& s) { h2::ops::reduce(s, h2::ops::ReduceOp::sum, o.ha, {1}, out(o, s, {8})); },
      {8, 8});
}

// range(0): 1 = through the bridge (LibTorch on privateuseone), 0 = h2::ops directly.
#define H2_BRIDGE_BENCHMARK(fn)                              \
  BENCHMARK(fn)->Arg(0)->UseRealTime()->Name(#fn "/direct"); \
  BENCHMARK(fn)->Arg(1)->UseRealTime()->Name(#fn "/bridge")
H2_BRIDGE_BENCHMARK(BM_Add);
H2_BRIDGE_BENCHMARK(BM_MulScalar);
H2_BRIDGE_BENCHMARK(BM_Mm);
H2_BRIDGE_BENCHMARK(BM_Gelu);
H2_BRIDGE_BENCHMARK(BM_Softmax);
H2_BRIDGE_BENCHMARK(BM_SumDim);

}  // namespace

int main(int argc, char** argv) {
  // Before DiTorch first loads the plugin: one cpu-reference device whose streams run the work on the
  // calling thread.
  setenv("H2_CPU_REFERENCE_BLOCKING", "1", 1);
  setenv("H2_TORCH_DEVICES", "cpu-reference:0", 1);
  std::string json_path;
  if (!h2::bench::initialize(argc, argv, json_path)) return 2;
  h2::bench::PerCallReporter collector(kBatch);
  benchmark::RunSpecifiedBenchmarks(&collector);

  auto ns = [&](const std::string& name) { return collector.ns(name); };
  std::cout << "\nDiTorch's bridge over h2::ops, per call (cpu-reference, blocking streams; medians)\n";
  std::printf("  %-12s %12s %12s %16s %8s\n", "operator", "h2::ops ns", "bridge ns", "overhead ns", "ratio");
  nlohmann::ordered_json operators = nlohmann::ordered_json::object();
  double worst = 0;
  for (const char* op : {"BM_Add", "BM_MulScalar", "BM_Mm", "BM_Gelu", "BM_Softmax", "BM_SumDim"}) {
    const double direct = ns(std::string(op) + "/direct/0/real_time"),
                 bridge = ns(std::string(op) + "/bridge/1/real_time");
    worst = std::max(worst, bridge - direct);
    std::printf("  %-12s %12.0f %12.0f %16.0f %8.2f\n", op + 3, direct, bridge, bridge - direct, bridge / direct);
    operators[op + 3] = {{"h2_ops_ns", direct}, {"bridge_ns", bridge}, {"overhead_ns", bridge - direct}};
  }
  std::printf("  largest overhead %.2f us (goal < 2 us)\n", worst / 1e3);
  if (!json_path.empty()) {
    const nlohmann::ordered_json result = {
        {"benchmark", "ditorch_bridge_overhead"}, {"operators", operators}, {"largest_overhead_ns", worst}};
    std::ofstream(json_path) << result.dump(2) << "\n";
  }
  return 0;
}
