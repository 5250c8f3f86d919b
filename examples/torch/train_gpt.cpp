// The GPT of examples/torch/train_gpt.py in LibTorch's C++ API: a plain LibTorch program in which
// moving the model onto an H2 device is the device (--device privateuseone) and the one call that
// moves the module there. Linking libh2torch registers H2 as LibTorch's PrivateUse1 device.
//
// The model is the one of examples/models/*.json (pre-norm blocks of causal self-attention with
// rotary positions and a GELU MLP, LayerNorm, no biases in the linear layers), the data the byte
// corpus `h2 train` reads by default (/usr/share/common-licenses; sample i of the run starts at
// splitmix64(splitmix64(seed) ^ i)), the optimizer LibTorch's AdamW.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "h2torch/h2torch.hpp"

namespace {

namespace F = torch::nn::functional;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Every regular file of a directory, concatenated in name order.
std::vector<uint8_t> read_corpus(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<uint8_t> bytes;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return bytes;
}

// Samples first .. first + size - 1: inputs and next-byte targets, [size, seq_len] each.
std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<uint8_t>& corpus, int64_t first, int64_t size,
                                              int64_t seq_len, uint64_t seed) {
  const auto window = static_cast<uint64_t>(seq_len + 1);
  torch::Tensor data = torch::empty({size, seq_len + 1}, torch::kLong);
  auto rows = data.accessor<int64_t, 2>();
  for (int64_t i = 0; i < size; ++i) {
    const uint64_t start =
        splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(first + i)) % (corpus.size() - window + 1);
    for (int64_t t = 0; t <= seq_len; ++t) rows[i][t] = corpus[start + static_cast<uint64_t>(t)];
  }
  return {data.narrow(1, 0, seq_len).contiguous(), data.narrow(1, 1, seq_len).contiguous()};
}

// Rotary positions on x [B, T, heads, D]: the pairs (i, i + D/2) turned by the position's angle.
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  const torch::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t hidden, int64_t heads, int64_t ffn)
      : heads(heads),
        norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        w_qkv(register_module("w_qkv", torch::nn::Linear(torch::nn::LinearOptions(hidden, 3 * hidden).bias(false)))),
        w_o(register_module("w_o", torch::nn::Linear(torch::nn::LinearOptions(hidden, hidden).bias(false)))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        w_up(register_module("w_up", torch::nn::Linear(torch::nn::LinearOptions(hidden, ffn).bias(false)))),
        w_down(register_module("w_down", torch::nn::Linear(torch::nn::LinearOptions(ffn, hidden).bias(false)))) {}

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& future) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), D = C / heads;
    const std::vector<torch::Tensor> qkv = w_qkv(norm1(x)).split(C, -1);
    const torch::Tensor q = rotate(qkv[0].view({B, T, heads, D}), cos, sin).transpose(1, 2);  // [B, heads, T, D]
    const torch::Tensor k = rotate(qkv[1].view({B, T, heads, D}), cos, sin).transpose(1, 2);
    const torch::Tensor v = qkv[2].view({B, T, heads, D}).transpose(1, 2);
    torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const torch::Tensor attention = torch::matmul(torch::softmax(scores, -1), v);
    x = x + w_o(attention.transpose(1, 2).reshape({B, T, C}));
    return x + w_down(torch::gelu(w_up(norm2(x))));
  }

  int64_t heads;
  torch::nn::LayerNorm norm1;
  torch::nn::Linear w_qkv, w_o;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear w_up, w_down;
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  GptImpl(int64_t layers, int64_t hidden, int64_t heads, int64_t ffn, int64_t vocab, int64_t seq_len)
      : embedding(register_module("embedding", torch::nn::Embedding(vocab, hidden))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        final_norm(register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(hidden, vocab).bias(false)))) {
    for (int64_t i = 0; i < layers; ++i) blocks->push_back(Block(hidden, heads, ffn));
    // cos and sin of position * 10000^(-2i / head_dim), and which positions are in the future.
    const int64_t head_dim = hidden / heads;
    const torch::Tensor inverse = torch::pow(10000.0, -torch::arange(0, head_dim, 2, torch::kDouble) / head_dim);
    const torch::Tensor angles = torch::arange(seq_len, torch::kDouble).unsqueeze(1) * inverse.unsqueeze(0);
    cos = register_buffer("cos", angles.cos().to(torch::kFloat));
    sin = register_buffer("sin", angles.sin().to(torch::kFloat));
    future = register_buffer("future", torch::ones({seq_len, seq_len}, torch::kBool).triu(1));
    // GPT-2's initialisation: std 0.02, the residual projections scaled by 1/sqrt(2 * layers).
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      torch::Tensor& p = item.value();
      if (p.dim() != 2) continue;
      const bool residual = item.key().ends_with("w_o.weight") || item.key().ends_with("w_down.weight");
      torch::nn::init::normal_(p, 0.0, residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(layers)) : 0.02);
    }
  }

  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets) {
    const int64_t T = tokens.size(1);
    torch::Tensor x = embedding(tokens);
    const torch::Tensor c = cos.narrow(0, 0, T), s = sin.narrow(0, 0, T), f = future.narrow(0, 0, T).narrow(1, 0, T);
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x, c, s, f);
    const torch::Tensor logits = lm_head(final_norm(x));
    return F::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }

  torch::nn::Embedding embedding;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm final_norm;
  torch::nn::Linear lm_head;
  torch::Tensor cos, sin, future;
};
TORCH_MODULE(Gpt);

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A plain LibTorch GPT trained on bytes, the model and data of `h2 train`"};
  std::string device_name = "cpu", model_path = H2_EXAMPLE_MODEL, json_path;
  int64_t layers = 0, hidden = 0, seq_len = 0, batch_size = 0, steps = 20;
  double lr = 1e-3;
  uint64_t seed = 1234;
  app.add_option("--device", device_name, "cpu, or privateuseone[:N] for H2")->capture_default_str();
  app.add_option("--model", model_path, "a model description (examples/models/*.json)")->capture_default_str();
  app.add_option("--layers", layers, "override the model's layers");
  app.add_option("--hidden", hidden, "override the model's hidden size (and ffn = 4 * hidden)");
  app.add_option("--seq-len", seq_len, "override the model's sequence length");
  app.add_option("--batch", batch_size, "samples per step (default: the model's global_batch)");
  app.add_option("--steps", steps)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", lr)->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--json", json_path, "write the losses and step times here");
  CLI11_PARSE(app, argc, argv);

  try {
    std::ifstream in(model_path);
    if (!in) throw std::runtime_error(model_path + ": cannot be read");
    const nlohmann::json m = nlohmann::json::parse(in);
    if (m.value("dtype", "f32") != "f32" || m.value("mlp", "gelu") != "gelu" ||
        m.value("kv_heads", m.at("heads").get<int64_t>()) != m.at("heads").get<int64_t>())
      throw std::runtime_error(model_path + ": this example trains f32 GELU models without grouped-query attention");
    const int64_t ffn = hidden > 0 ? 4 * hidden : m.at("ffn").get<int64_t>();
    if (layers == 0) layers = m.at("layers");
    if (hidden == 0) hidden = m.at("hidden");
    if (seq_len == 0) seq_len = m.at("seq_len");
    if (batch_size == 0) batch_size = m.at("global_batch");

    const torch::Device device(device_name);
    torch::manual_seed(seed);
    Gpt model(layers, hidden, m.at("heads").get<int64_t>(), ffn, m.at("vocab").get<int64_t>(), seq_len);
    // LibTorch 1.13's C++ Module::to knows only its built-in devices; h2torch::to moves a module onto
    // an H2 device (Python's Module.to needs nothing of the kind).
    if (device.type() == c10::DeviceType::PrivateUse1)
      h2torch::to(*model, device);
    else
      model->to(device);
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.01));
    const std::vector<uint8_t> corpus = read_corpus("/usr/share/common-licenses");
    int64_t parameters = 0;
    for (const auto& p : model->parameters()) parameters += p.numel();
    std::cout << "train_gpt: " << parameters << " parameters, " << layers << " layers, hidden " << hidden << ", batch "
              << batch_size << " x " << seq_len << " bytes, on " << device << std::endl;

    std::vector<double> losses, seconds;
    for (int64_t step = 0; step < steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      const auto [tokens, targets] = batch(corpus, step * batch_size, batch_size, seq_len, seed);
      const torch::Tensor loss = model->forward(tokens.to(device), targets.to(device));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      losses.push_back(loss.item<double>());
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::printf("step %4lld/%lld  loss %.6f  %8.1f ms\n", static_cast<long long>(step + 1),
                  static_cast<long long>(steps), losses.back(), seconds.back() * 1e3);
      std::fflush(stdout);
    }

    nlohmann::json result{{"device", device.str()}, {"losses", losses}, {"step_seconds", seconds}};
    if (device.type() == c10::DeviceType::PrivateUse1) {
      result["h2_device"] = h2torch::device(device.has_index() ? device.index() : 0).label();
      result["fallback_counts"] = h2torch::fallback_counts();
      int64_t fallbacks = 0;
      for (const auto& [op, count] : h2torch::fallback_counts()) fallbacks += count;
      std::cout << "operators run on the CPU (fallback): " << fallbacks << std::endl;
    }
    if (!json_path.empty()) std::ofstream(json_path) << result.dump(1) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "train_gpt: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
