// The GPT model of HeteroPP on the cpu-reference plugin: its hand-written backward against finite
// differences of its forward, a model cut into stages against the whole model, 16-bit models against
// the f32 model, and training that lowers the loss on the default corpus.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "h2/heteropp/corpus.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"

namespace h2::heteropp {
namespace {

using heteroauto::Mlp;
using heteroauto::Norm;

RuntimeOptions cpu_reference_only() {
  RuntimeOptions options;
  options.plugins = {"cpu-reference"};
  return options;
}

GptConfig tiny(Norm norm, Mlp mlp) {
  GptConfig c;
  c.layers = 2;
  c.hidden = 16;
  c.ffn = 24;
  c.heads = 4;
  c.kv_heads = 2;  // grouped KV heads
  c.seq_len = 6;
  c.vocab = 20;
  c.norm = norm;
  c.mlp = mlp;
  c.seed = 7;
  return c;
}

struct Batch {
  Tensor tokens, targets;
};

Batch make_batch(Stream& stream, const GptConfig& c, int64_t batch, uint64_t salt) {
  std::vector<double> tokens, targets;
  for (int64_t i = 0; i < batch * c.seq_len; ++i) {
    tokens.push_back(static_cast<double>((i * 7 + salt * 3 + 1) % c.vocab));
    targets.push_back(static_cast<double>((i * 5 + salt + 2) % c.vocab));
  }
  return {Tensor::from_host(stream, tokens, {batch, c.seq_len}, DType::i64),
          Tensor::from_host(stream, targets, {batch, c.seq_len}, DType::i64)};
}

double mean_loss(GptStage& model, Stream& stream, const Batch& b, int micro_batch = 0) {
  const std::vector<double> losses = model.forward(micro_batch, b.tokens, b.targets).to_host(stream);
  double sum = 0;
  for (double l : losses) sum += l;
  return sum / static_cast<double>(losses.size());
}

class GptTest : public ::testing::TestWithParam<std::pair<Norm, Mlp>> {
 protected:
  Runtime runtime{cpu_reference_only()};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
};

// d(mean loss)/d(w) from backward against central differences, for a spread of elements of every
// parameter. f32 forward: differences of 1e-2 keep the rounding error near 1e-5.
TEST_P(GptTest, BackwardMatchesFiniteDifferences) {
  const GptConfig c = tiny(GetParam().first, GetParam().second);
  GptStage model(c, 0, c.layers, true, true, device, stream);
  const Batch b = make_batch(stream, c, 2, 0);
  const double tokens = static_cast<double>(2 * c.seq_len);
  model.forward(0, b.tokens, b.targets);
  model.backward(0, {}, 1 / tokens);
  const double eps = 1e-2;
  int checked = 0;
  for (Parameter& p : model.parameters()) {
    const std::vector<double> grad = p.grad.to_host(stream);
    std::vector<double> value = p.value.to_host(stream);
    for (int k = 0; k < 4; ++k) {
      const size_t i = (static_cast<size_t>(k) * 7919) % value.size();
      const double original = value[i];
      value[i] = original + eps;
      p.value.copy_from_host(stream, value);
      const double up = mean_loss(model, stream, b, 1);
      model.backward(1, {}, 0);  // drops micro-batch 1's activations (weight 0: no gradient)
      value[i] = original - eps;
      p.value.copy_from_host(stream, value);
      const double down = mean_loss(model, stream, b, 1);
      model.backward(1, {}, 0);
      value[i] = original;
      p.value.copy_from_host(stream, value);
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 2e-4 + 0.03 * std::abs(numeric)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

// A model cut into three stages, activations and gradients handed on by hand, gives the same
// losses and gradients as the whole model: same initial weights from (seed, layer) alone.
TEST_P(GptTest, StagesComputeWhatTheWholeModelComputes) {
  GptConfig c = tiny(GetParam().first, GetParam().second);
  c.layers = 3;
  GptStage whole(c, 0, 3, true, true, device, stream);
  GptStage first(c, 0, 1, true, false, device, stream), middle(c, 1, 2, false, false, device, stream),
      last(c, 2, 3, false, true, device, stream);
  const Batch b = make_batch(stream, c, 2, 1);
  const double weight = 1.0 / static_cast<double>(2 * c.seq_len);

  const std::vector<double> want = whole.forward(0, b.tokens, b.targets).to_host(stream);
  whole.backward(0, {}, weight);
  const Tensor a1 = first.forward(0, b.tokens);
  const Tensor a2 = middle.forward(0, a1);
  const std::vector<double> got = last.forward(0, a2, b.targets).to_host(stream);
  first.backward(0, middle.backward(0, last.backward(0, {}, weight)));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "token " << i;

  std::map<std::string, std::vector<double>> staged;
  for (GptStage* stage : {&first, &middle, &last})
    for (Parameter& p : stage->parameters()) staged[p.name] = p.grad.to_host(stream);
  ASSERT_EQ(staged.size(), whole.parameters().size());
  for (Parameter& p : whole.parameters()) {
    ASSERT_TRUE(staged.count(p.name)) << p.name;
    EXPECT_EQ(staged[p.name], p.grad.to_host(stream)) << p.name;
  }
}

// Recomputation gives the same losses and gradients bit for bit, with two micro-batches in flight,
// and holds less device memory while they are.
TEST_P(GptTest, RecomputationChangesMemoryNotResults) {
  GptConfig c = tiny(GetParam().first, GetParam().second);
  c.layers = 3;
  GptStage kept(c, 0, 3, true, true, device, stream), recomputed(c, 0, 3, true, true, device, stream);
  recomputed.set_recompute(true);
  const Batch b0 = make_batch(stream, c, 2, 2), b1 = make_batch(stream, c, 2, 3);
  // What tensors hold (the caching allocator keeps freed memory from the plugin, so the device's free
  // memory would not show what recomputation saves).
  auto in_use = [&] { return memory_stats(device).allocated_bytes; };
  const uint64_t before = in_use();
  std::vector<double> losses[2];
  uint64_t held[2];
  for (GptStage* model : {&kept, &recomputed}) {
    const size_t k = model == &kept ? 0 : 1;
    const Tensor l0 = model->forward(0, b0.tokens, b0.targets), l1 = model->forward(1, b1.tokens, b1.targets);
    held[k] = in_use() - before;
    for (const Tensor& l : {l0, l1})
      for (double v : l.to_host(stream)) losses[k].push_back(v);
    model->backward(1, {}, 0.5);
    model->backward(0, {}, 0.25);
  }
  EXPECT_EQ(losses[0], losses[1]);
  for (size_t i = 0; i < kept.parameters().size(); ++i)
    EXPECT_EQ(kept.parameters()[i].grad.to_host(stream), recomputed.parameters()[i].grad.to_host(stream))
        << kept.parameters()[i].name;
  EXPECT_LT(held[1], held[0] / 2) << "activations held: " << held[1] << " bytes recomputed, " << held[0] << " kept";
}

INSTANTIATE_TEST_SUITE_P(NormsAndMlps, GptTest,
                         ::testing::Values(std::pair{Norm::rms_norm, Mlp::gelu}, std::pair{Norm::layer_norm, Mlp::gelu},
                                           std::pair{Norm::rms_norm, Mlp::swiglu}),
                         [](const auto& info) {
                           return std::string(info.param.first == Norm::rms_norm ? "RmsNorm" : "LayerNorm") +
                                  (info.param.second == Mlp::gelu ? "Gelu" : "SwiGlu");
                         });

TEST(GptStageTest, RejectsBadLayoutsAndMisuse) {
  Runtime runtime{cpu_reference_only()};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  GptConfig c = tiny(Norm::rms_norm, Mlp::gelu);
  EXPECT_THROW(GptStage(c, 1, 3, false, true, device, stream), Error);  // beyond the 2 layers
  c.heads = 3;
  EXPECT_THROW(GptStage(c, 0, 2, true, true, device, stream), Error);  // 16 does not split in 3
  c = tiny(Norm::rms_norm, Mlp::gelu);
  GptStage model(c, 0, 2, true, true, device, stream);
  EXPECT_THROW(model.backward(3, {}, 1), Error);  // no forward of micro-batch 3
  const Batch b = make_batch(stream, c, 1, 0);
  EXPECT_THROW(model.forward(0, b.tokens.view({2, c.seq_len / 2}), b.targets), Error);  // not seq_len long
  model.forward(0, b.tokens, b.targets);
  EXPECT_THROW(model.forward(0, b.tokens, b.targets), Error);  // micro-batch 0 in flight already
}

TEST(ByteCorpusTest, SamplesAreDeterministicWindowsOfTheFiles) {
  const std::vector<std::string> files = ByteCorpus::default_files();
  ASSERT_FALSE(files.empty()) << "/usr/share/common-licenses is empty";
  const ByteCorpus corpus = ByteCorpus::from_files(files, 65);
  std::vector<double> in1, out1, in2, out2;
  corpus.sample(42, 64, 1, in1, out1);
  corpus.sample(42, 64, 1, in2, out2);
  EXPECT_EQ(in1, in2);
  for (size_t i = 0; i + 1 < in1.size(); ++i) EXPECT_EQ(out1[i], in1[i + 1]);
  corpus.sample(43, 64, 1, in2, out2);
  EXPECT_NE(in1, in2);
  EXPECT_THROW(ByteCorpus::from_files({"/nonexistent/corpus.txt"}, 1), Error);
  EXPECT_THROW(ByteCorpus::from_files({files[0]}, 1ull << 40), Error);
}

// Tensor parallelism over two ranks (two threads with a stream each; the group's sum goes through
// the host): every rank gets the whole model's losses within f32 rounding, and its gradients are its
// shards of the whole model's gradients.
TEST(GptTensorParallelTest, TwoRanksComputeWhatOneComputes) {
  Runtime runtime{cpu_reference_only()};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  GptConfig c = tiny(Norm::layer_norm, Mlp::swiglu);  // 4 heads, 2 KV heads, ffn 24
  const Batch b = make_batch(stream, c, 2, 5);
  const double weight = 1.0 / static_cast<double>(2 * c.seq_len);
  GptStage whole(c, 0, c.layers, true, true, device, stream);
  const std::vector<double> want = whole.forward(0, b.tokens, b.targets).to_host(stream);
  whole.backward(0, {}, weight);

  // A two-party sum: the second to arrive adds and wakes the first. The result is kept apart from
  // the running sum: the second party may start the next sum before the first has woken.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<double> sum, result;
  int arrived = 0, generation = 0;
  auto exchange = [&](const std::vector<double>& mine) {
    std::unique_lock lock(mutex);
    const int my_generation = generation;
    if (arrived++ == 0) {
      sum = mine;
      changed.wait(lock, [&] { return generation != my_generation; });
    } else {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += mine[i];
      result = sum;
      arrived = 0;
      ++generation;
      changed.notify_all();
    }
    return result;
  };
  std::vector<double> losses[2];
  std::map<std::string, std::vector<double>> grads[2];
  std::string failure[2];
  auto rank_main = [&](int r) {
    try {
      Stream own = device.create_stream();
      TensorParallel tp{2, r, [&](const Tensor& t) { t.copy_from_host(own, exchange(t.to_host(own))); }};
      GptStage shard(c, 0, c.layers, true, true, device, own, tp);
      losses[r] = shard.forward(0, b.tokens, b.targets).to_host(own);
      shard.backward(0, {}, weight);
      for (Parameter& p : shard.parameters()) grads[r][p.name] = p.grad.to_host(own);
    } catch (const std::exception& e) {
      failure[r] = e.what();
    }
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  ASSERT_EQ(failure[0] + failure[1], "");
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_EQ(losses[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(losses[0][i], want[i], 1e-5 * std::abs(want[i])) << i;
  int sharded = 0;
  for (Parameter& p : whole.parameters()) {
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(grads[r].count(p.name)) << p.name;
      const Tensor expected = Tensor::empty(device, shard_shape(p.master.shape(), p.sharding, 2), DType::f32);
      copy_shard(stream, p.grad, expected, p.sharding, 2, r, true);
      const std::vector<double> e = expected.to_host(stream), g = grads[r][p.name];
      ASSERT_EQ(g.size(), e.size()) << p.name;
      double scale = 0;
      for (double v : e) scale = std::max(scale, std::abs(v));
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-5 * scale + 1e-9) << p.name << "[" << i << "]";
    }
    sharded += p.sharding.sharded() ? 1 : 0;
  }
  EXPECT_EQ(sharded, 5 * c.layers) << "w_qkv, w_o, w_gate, w_up and w_down of each block";
}

// Mixed precision: the f16 and bf16 models hold 16-bit copies of their matrices next to f32 masters,
// compute in 16 bits, and give the f32 model's loss and gradients within 16-bit rounding; a model cut
// into stages still computes exactly what the whole 16-bit model computes.
TEST(GptPrecisionTest, SixteenBitModelsFollowTheF32Model) {
  Runtime runtime{cpu_reference_only()};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  GptConfig c = tiny(Norm::layer_norm, Mlp::swiglu);
  c.layers = 3;
  const Batch b = make_batch(stream, c, 2, 4);
  const double weight = 1.0 / static_cast<double>(2 * c.seq_len);
  GptStage reference(c, 0, 3, true, true, device, stream);
  const std::vector<double> want = reference.forward(0, b.tokens, b.targets).to_host(stream);
  reference.backward(0, {}, weight);
  // Gradient tolerances: about 3x the relative difference measured (f16 0.3%, bf16 1%); f16 keeps 3
  // more mantissa bits than bf16.
  for (auto [dtype, tolerance] : {std::pair{DType::f16, 0.01}, std::pair{DType::bf16, 0.03}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    c.dtype = dtype;
    GptStage whole(c, 0, 3, true, true, device, stream);
    for (Parameter& p : whole.parameters()) {
      EXPECT_EQ(p.master.dtype(), DType::f32) << p.name;
      EXPECT_EQ(p.grad.dtype(), DType::f32) << p.name;
      EXPECT_EQ(p.value.dtype(), p.master.rank() >= 2 ? dtype : DType::f32) << p.name;
    }
    const std::vector<double> got = whole.forward(0, b.tokens, b.targets).to_host(stream);
    whole.backward(0, {}, weight);
    double loss = 0, loss_want = 0;
    for (size_t i = 0; i < got.size(); ++i) loss += got[i], loss_want += want[i];
    EXPECT_NEAR(loss, loss_want, 1e-3 * std::abs(loss_want));
    EXPECT_NE(loss, loss_want) << "the 16-bit model computed in f32";
    double worst = 0;
    for (size_t i = 0; i < whole.parameters().size(); ++i) {
      const std::vector<double> g = whole.parameters()[i].grad.to_host(stream);
      const std::vector<double> r = reference.parameters()[i].grad.to_host(stream);
      double diff = 0, norm = 0;
      for (size_t k = 0; k < g.size(); ++k) diff += (g[k] - r[k]) * (g[k] - r[k]), norm += r[k] * r[k];
      EXPECT_LT(std::sqrt(diff), tolerance * std::sqrt(norm) + 1e-7) << whole.parameters()[i].name;
      worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
    }
    std::cout << dtype_name(dtype) << ": loss " << loss / static_cast<double>(got.size()) << " against f32 "
              << loss_want / static_cast<double>(got.size()) << ", largest relative gradient difference " << worst
              << "\n";

    // Two stages hand each other 16-bit activations and gradients.
    GptStage first(c, 0, 2, true, false, device, stream), last(c, 2, 3, false, true, device, stream);
    const Tensor activations = first.forward(0, b.tokens);
    EXPECT_EQ(activations.dtype(), dtype);
    EXPECT_EQ(last.forward(0, activations, b.targets).to_host(stream), got);
    first.backward(0, last.backward(0, {}, weight));
    for (GptStage* stage : {&first, &last})
      for (Parameter& p : stage->parameters())
        for (Parameter& q : whole.parameters())
          if (q.name == p.name) {
            EXPECT_EQ(p.grad.to_host(stream), q.grad.to_host(stream)) << p.name;
          }
    EXPECT_THROW(last.forward(1, Tensor::empty(device, activations.shape(), DType::f32), b.targets), Error);
  }
}

// AdamW on byte-level text: the loss falls well below a uniform guess over 256 bytes (ln 256 = 5.5),
// in f32 and in 16-bit mixed precision (f16 with a fixed loss scale, as f16 gradients would underflow).
class GptTrainingTest : public ::testing::TestWithParam<DType> {};

TEST_P(GptTrainingTest, AdamWLowersTheLossOnTheDefaultCorpus) {
  Runtime runtime{cpu_reference_only()};
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  GptConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.ffn = 64;
  c.heads = 4;
  c.kv_heads = 4;
  c.seq_len = 32;
  c.vocab = 256;
  c.dtype = GetParam();
  GptStage model(c, 0, c.layers, true, true, device, stream);
  AdamW optimizer(model, stream, {.weight_decay = 0});
  const ByteCorpus corpus = ByteCorpus::from_files(ByteCorpus::default_files(), 33);
  const int64_t batch = 8;
  const double loss_scale = c.dtype == DType::f16 ? 1024 : 1;
  double first = 0, last = 0;
  for (int step = 1; step <= 60; ++step) {
    std::vector<double> tokens, targets, in, out;
    for (int64_t i = 0; i < batch; ++i) {
      corpus.sample(static_cast<uint64_t>((step - 1) * batch + i), c.seq_len, 1, in, out);
      tokens.insert(tokens.end(), in.begin(), in.end());
      targets.insert(targets.end(), out.begin(), out.end());
    }
    model.zero_grads();
    const Tensor losses = model.forward(0, Tensor::from_host(stream, tokens, {batch, c.seq_len}, DType::i64),
                                        Tensor::from_host(stream, targets, {batch, c.seq_len}, DType::i64));
    model.backward(0, {}, loss_scale / static_cast<double>(batch * c.seq_len));
    optimizer.step(3e-3, 1 / loss_scale, step);
    double loss = 0;
    for (double l : losses.to_host(stream)) loss += l;
    loss /= static_cast<double>(batch * c.seq_len);
    if (step == 1) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(256.0), 0.3);
  EXPECT_LT(last, first - 1.5) << "first " << first << ", last " << last;
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptTrainingTest, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace h2::heteropp
