// The CUDA plugin against its peers on one GPU, in one run:
//   gemm       through libh2core and the plugin vs cuBLAS called directly (cublasGemmEx, the same
//              dtypes, fp32 accumulation, the same stream kind), goal >= 95%;
//   attention  forward + backward through the plugin, timed here; PyTorch's
//              scaled_dot_product_attention on the same shapes is timed by sdpa_peer.py, and
//              compare.py prints the ratio (goal >= 1.0x).
// Times are medians of CUDA-event timings over repeated launches after a warm-up. Prints a table
// and, with --json FILE, the numbers for compare.py.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "h2/h2.hpp"

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(s));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of `work` enqueued on an h2 stream.
double time_h2(h2::Device& device, h2::Stream& stream, const std::function<void()>& work) {
  h2::Event start = device.create_event(), end = device.create_event();
  for (int i = 0; i < kWarmup; ++i) work();
  std::vector<double> times;
  for (int i = 0; i < kRepeats; ++i) {
    start.record(stream);
    work();
    end.record(stream);
    end.synchronize();
    times.push_back(h2::Event::elapsed_ms(start, end));
  }
  stream.synchronize();
  return median(times);
}

double time_cuda(cudaStream_t stream, const std::function<void()>& work) {
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  for (int i = 0; i < kWarmup; ++i) work();
  std::vector<double> times;
  for (int i = 0; i < kRepeats; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    work();
    check(cudaEventRecord(end, stream), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return median(times);
}

cudaDataType_t cuda_type(h2::DType d) {
  return d == h2::DType::bf16 ? CUDA_R_16BF : d == h2::DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

struct GemmCase {
  int64_t m, n, k;
  h2::DType dtype;
};

nlohmann::json bench_gemm(h2::Device& device, h2::Stream& stream, const GemmCase& g) {
  auto a = h2::Tensor::empty(device, {g.m, g.k}, g.dtype), b = h2::Tensor::empty(device, {g.k, g.n}, g.dtype);
  auto c = h2::Tensor::empty(device, {g.m, g.n}, g.dtype);
  h2::ops::uniform(stream, a, -1, 1, {1, 0});
  h2::ops::uniform(stream, b, -1, 1, {2, 0});
  const double plugin_ms = time_h2(device, stream, [&] { h2::ops::gemm(stream, a, b, c); });

  // cuBLAS directly, on the same buffers: row-major C = A B is column-major C^T = B^T A^T.
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetStream(handle, s), "cublasSetStream");
  const float alpha = 1, beta = 0;
  const cudaDataType_t t = cuda_type(g.dtype);
  const double direct_ms = time_cuda(s, [&] {
    check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.n), static_cast<int>(g.m),
                       static_cast<int>(g.k), &alpha, b.data(), t, static_cast<int>(g.n), a.data(), t,
                       static_cast<int>(g.k), &beta, c.data(), t, static_cast<int>(g.n), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  });
  cublasDestroy(handle);
  cudaStreamDestroy(s);
  const double flops = 2.0 * g.m * g.n * g.k;
  return {{"m", g.m},
          {"n", g.n},
          {"k", g.k},
          {"dtype", h2::dtype_name(g.dtype)},
          {"plugin_ms", plugin_ms},
          {"cublas_ms", direct_ms},
          {"plugin_tflops", flops / plugin_ms / 1e9},
          {"cublas_tflops", flops / direct_ms / 1e9},
          {"ratio", direct_ms / plugin_ms}};
}

struct AttentionCase {
  int64_t batch, heads, kv_heads, seq, dim;
  h2::DType dtype;
};

nlohmann::json bench_attention(h2::Device& device, h2::Stream& stream, const AttentionCase& a) {
  auto q = h2::Tensor::empty(device, {a.batch, a.heads, a.seq, a.dim}, a.dtype);
  auto k = h2::Tensor::empty(device, {a.batch, a.kv_heads, a.seq, a.dim}, a.dtype);
  auto v = h2::Tensor::empty(device, {a.batch, a.kv_heads, a.seq, a.dim}, a.dtype);
  auto o = h2::Tensor::empty(device, q.shape(), a.dtype), dout = h2::Tensor::empty(device, q.shape(), a.dtype);
  auto dq = h2::Tensor::empty(device, q.shape(), a.dtype);
  auto dk = h2::Tensor::empty(device, k.shape(), a.dtype), dv = h2::Tensor::empty(device, v.shape(), a.dtype);
  auto lse = h2::Tensor::empty(device, {a.batch, a.heads, a.seq}, h2::DType::f32);
  uint64_t seed = 10;
  for (auto* t : {&q, &k, &v, &dout}) h2::ops::normal(stream, *t, 0, 1, {seed++, 0});
  const double scale = 1 / std::sqrt(static_cast<double>(a.dim));
  const double forward_ms = time_h2(device, stream, [&] { h2::ops::attention(stream, q, k, v, o, lse, scale); });
  const double step_ms = time_h2(device, stream, [&] {
    h2::ops::attention(stream, q, k, v, o, lse, scale);
    h2::ops::attention_backward(stream, q, k, v, o, lse, dout, dq, dk, dv, scale);
  });
  // Causal: half of the 4 b h s^2 d multiply-adds of QK^T and PV forward, 2.5x that for the backward.
  const double forward_flops = 4.0 * a.batch * a.heads * a.seq * a.seq * a.dim / 2;
  return {{"batch", a.batch},
          {"heads", a.heads},
          {"kv_heads", a.kv_heads},
          {"seq", a.seq},
          {"dim", a.dim},
          {"dtype", h2::dtype_name(a.dtype)},
          {"causal", true},
          {"plugin_forward_ms", forward_ms},
          {"plugin_step_ms", step_ms},
          {"plugin_step_tflops", 3.5 * forward_flops / step_ms / 1e9}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The CUDA plugin against cuBLAS (gemm) and, with compare.py, PyTorch SDPA (attention)"};
  std::string json_path;
  bool quick = false;
  app.add_option("--json", json_path, "Also write the results to this file");
  app.add_flag("--quick", quick, "Small shapes (a smoke test of the benchmark itself)");
  CLI11_PARSE(app, argc, argv);
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::cerr << "cuda_kernels: skipped: no CUDA device (or no NVIDIA driver) on this machine\n";
    return 77;  // the test harness's "skipped"
  }
  try {
    nlohmann::json out;
    {
      h2::Runtime runtime(h2::RuntimeOptions{.plugins = {"cuda"}});
      h2::Device device = runtime.device("cuda", 0);
      h2::Stream stream = device.create_stream();
      out["device"] = device.properties().name;
      const int64_t n = quick ? 512 : 8192;
      for (h2::DType d : {h2::DType::bf16, h2::DType::f16, h2::DType::f32}) {
        out["gemm"].push_back(bench_gemm(device, stream, {n, n, n, d}));
        std::cerr << "gemm " << h2::dtype_name(d) << " done\n";
      }
      out["gemm"].push_back(
          bench_gemm(device, stream, {quick ? 256 : 16384, quick ? 256 : 4096, quick ? 256 : 4096, h2::DType::bf16}));
      const std::vector<AttentionCase> attention_cases =
          quick ? std::vector<AttentionCase>{{1, 4, 4, 256, 64, h2::DType::bf16}}
                : std::vector<AttentionCase>{{4, 32, 32, 2048, 128, h2::DType::bf16},
                                             {4, 32, 8, 2048, 128, h2::DType::bf16},
                                             {8, 16, 16, 1024, 64, h2::DType::f16}};
      for (const auto& a : attention_cases) {
        out["attention"].push_back(bench_attention(device, stream, a));
        std::cerr << "attention seq " << a.seq << " done\n";
      }
    }
    std::printf("%-6s %6s %6s %6s %10s %10s %10s\n", "gemm", "m", "n", "k", "plugin TF", "cuBLAS TF", "ratio");
    for (const auto& g : out["gemm"])
      std::printf("%-6s %6lld %6lld %6lld %10.1f %10.1f %9.3fx\n", g["dtype"].get<std::string>().c_str(),
                  g["m"].get<long long>(), g["n"].get<long long>(), g["k"].get<long long>(),
                  g["plugin_tflops"].get<double>(), g["cublas_tflops"].get<double>(), g["ratio"].get<double>());
    for (const auto& a : out["attention"])
      std::printf("attention b%lld h%lld/%lld s%lld d%lld %s: forward %.3f ms, forward+backward %.3f ms (%.1f TF)\n",
                  a["batch"].get<long long>(), a["heads"].get<long long>(), a["kv_heads"].get<long long>(),
                  a["seq"].get<long long>(), a["dim"].get<long long>(), a["dtype"].get<std::string>().c_str(),
                  a["plugin_forward_ms"].get<double>(), a["plugin_step_ms"].get<double>(),
                  a["plugin_step_tflops"].get<double>());
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "cuda_kernels: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
