#include "h2/heteropp/gpt.hpp"

#include <cmath>

namespace h2::heteropp {

using heteroauto::Mlp;
using heteroauto::Norm;

GptConfig GptConfig::from_model(const heteroauto::Model& model, uint64_t seed) {
  GptConfig c;
  c.layers = model.layers;
  c.hidden = model.hidden;
  c.ffn = model.ffn;
  c.heads = model.heads;
  c.kv_heads = model.kv_heads;
  c.seq_len = model.seq_len;
  c.vocab = model.vocab;
  c.mlp = model.mlp;
  c.norm = model.norm;
  c.seed = seed;
  c.dtype = dtype_from_name(model.dtype).value_or(DType::f32);  // the description allows f32, f16, bf16
  return c;
}

// Indices into GptStage::parameters_ (-1: absent, e.g. biases under RMSNorm).
struct GptStage::Block {
  int index = 0;  // the layer's index in the whole model
  int norm1 = -1, norm1_bias = -1, w_qkv = -1, w_o = -1, norm2 = -1, norm2_bias = -1;
  int w_gate = -1, w_up = -1, w_down = -1;
};

// What a block's backward needs from its forward, for one micro-batch.
struct GptStage::BlockCache {
  Tensor x;                 // input [N, C]
  Tensor h1, mean1, rstd1;  // norm1(x)
  Tensor q, k, v, o, lse;   // attention operands [B, heads, T, D] (q, k after rotary)
  Tensor attn;              // o as [N, C]
  Tensor x1;                // x + attn @ w_o
  Tensor h2, mean2, rstd2;  // norm2(x1)
  Tensor gate, up, act;     // MLP: act = gelu(up) or swiglu(gate, up)
};

struct GptStage::MicroBatch {
  Tensor tokens;  // first stage
  std::vector<BlockCache> blocks;
  bool recompute = false;                                   // blocks keep only their input
  Tensor final_in, hf, meanf, rstdf, logits, targets, lse;  // last stage
};

namespace {

// Every parameter's random stream comes from the seed, its layer and its position in the layer
// only, so any partition of the model into stages starts from identical weights.
uint64_t parameter_seed(uint64_t seed, int layer, int slot) {
  uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {static_cast<uint64_t>(layer + 2), static_cast<uint64_t>(slot + 1)}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace

GptStage::GptStage(const GptConfig& config, int first_block, int end_block, bool has_embedding, bool has_head,
                   const Device& device, Stream& stream, TensorParallel tp)
    : config_(config),
      first_block_(first_block),
      end_block_(end_block),
      has_embedding_(has_embedding),
      has_head_(has_head),
      device_(device),
      stream_(stream),
      tp_(std::move(tp)) {
  const GptConfig& c = config_;
  if (c.hidden % c.heads != 0 || c.heads % c.kv_heads != 0 || c.head_dim() % 2 != 0)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "GPT: hidden must split into heads of even size, and kv_heads must divide heads");
  if (c.dtype != DType::f32 && c.dtype != DType::f16 && c.dtype != DType::bf16)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "GPT: the model computes in f32, f16 or bf16, not " + std::string(dtype_name(c.dtype)));
  if (tp_.ranks < 1 || tp_.rank < 0 || tp_.rank >= tp_.ranks || (tp_.ranks > 1 && !tp_.allreduce))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT stage: tensor-parallel rank " + std::to_string(tp_.rank) + " of " +
                                                std::to_string(tp_.ranks) + " (ranks > 1 need an allreduce)");
  if (c.heads % tp_.ranks != 0 || c.kv_heads % tp_.ranks != 0 || c.ffn % tp_.ranks != 0)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT: tensor parallelism over " + std::to_string(tp_.ranks) +
                                                " ranks needs heads (" + std::to_string(c.heads) + "), kv_heads (" +
                                                std::to_string(c.kv_heads) + ") and ffn (" + std::to_string(c.ffn) +
                                                ") divisible by " + std::to_string(tp_.ranks));
  if (tp_.ranks > 1) require_deterministic_operators();
  if (first_block < 0 || end_block < first_block || end_block > c.layers)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT stage: blocks [" + std::to_string(first_block) + ", " +
                                                std::to_string(end_block) + ") are not within the model's " +
                                                std::to_string(c.layers) + " layers");
  const double std = 0.02, residual_std = 0.02 / std::sqrt(2.0 * c.layers);  // GPT-2's scaling
  const bool layer_norm = c.norm == Norm::layer_norm;
  const int64_t d = c.head_dim(), qkv = (c.heads + 2 * c.kv_heads) * d;
  // Column-parallel: w_qkv by heads within each of q, k and v; w_up and w_gate by columns.
  // Row-parallel: w_o and w_down by rows (Megatron-LM's split of attention and MLP).
  const Sharding qkv_columns{1, {c.heads * d, c.kv_heads * d, c.kv_heads * d}}, ffn_columns{1, {c.ffn}};
  const Sharding attention_rows{0, {c.hidden}}, ffn_rows{0, {c.ffn}};
  parameters_.reserve(static_cast<size_t>(4 + 9 * (end_block - first_block)));
  auto index_of = [&](const Parameter& p) { return static_cast<int>(&p - parameters_.data()); };
  if (has_embedding) embedding_ = index_of(add_parameter("embedding.weight", -1, {c.vocab, c.hidden}, std));
  for (int layer = first_block; layer < end_block; ++layer) {
    auto block = std::make_unique<Block>();
    block->index = layer;
    const std::string p = "block." + std::to_string(layer) + ".";
    block->norm1 = index_of(add_parameter(p + "norm1.weight", layer, {c.hidden}, 0, 1));
    if (layer_norm) block->norm1_bias = index_of(add_parameter(p + "norm1.bias", layer, {c.hidden}, 0));
    block->w_qkv = index_of(add_parameter(p + "w_qkv", layer, {c.hidden, qkv}, std, 0, qkv_columns));
    block->w_o = index_of(add_parameter(p + "w_o", layer, {c.hidden, c.hidden}, residual_std, 0, attention_rows));
    block->norm2 = index_of(add_parameter(p + "norm2.weight", layer, {c.hidden}, 0, 1));
    if (layer_norm) block->norm2_bias = index_of(add_parameter(p + "norm2.bias", layer, {c.hidden}, 0));
    if (c.mlp == Mlp::swiglu)
      block->w_gate = index_of(add_parameter(p + "w_gate", layer, {c.hidden, c.ffn}, std, 0, ffn_columns));
    block->w_up = index_of(add_parameter(p + "w_up", layer, {c.hidden, c.ffn}, std, 0, ffn_columns));
    block->w_down = index_of(add_parameter(p + "w_down", layer, {c.ffn, c.hidden}, residual_std, 0, ffn_rows));
    blocks_.push_back(std::move(block));
  }
  if (has_head) {
    final_norm_ = index_of(add_parameter("final_norm.weight", c.layers, {c.hidden}, 0, 1));
    if (layer_norm) final_norm_bias_ = index_of(add_parameter("final_norm.bias", c.layers, {c.hidden}, 0));
    lm_head_ = index_of(add_parameter("lm_head.weight", c.layers, {c.hidden, c.vocab}, std));
  }
  // Every gradient is a view into one buffer, in parameter order, so that the gradients of
  // consecutive layers can be summed across replicas with one allreduce.
  int64_t total = 0;
  for (const Parameter& p : parameters_) total += p.value.numel();
  grads_ = empty({std::max<int64_t>(total, 1)}, DType::f32);
  int64_t offset = 0;
  for (Parameter& p : parameters_) {
    p.grad_offset = offset;
    p.grad = grads_.slice(0, offset, offset + p.value.numel()).view(p.value.shape());
    offset += p.value.numel();
  }
  zero_grads();
}

GptStage::~GptStage() = default;

Parameter& GptStage::add_parameter(const std::string& name, int layer, Shape shape, double init_std, double init_value,
                                   Sharding sharding) {
  // The random stream: the seed, the layer (-1 the embedding, `layers` the head) and the
  // parameter's position within its layer.
  int slot = 0;
  for (const Parameter& p : parameters_) slot += p.layer == layer ? 1 : 0;
  const Shape local = shard_shape(shape, sharding, tp_.ranks);
  const bool cut = sharding.sharded() && tp_.ranks > 1;
  Parameter p{name, layer, empty(local, DType::f32), {}, {}, sharding, shape};
  // Drawn whole and in f32 whatever the model's dtype and tensor parallelism, so that every layout
  // of the model starts from the same weights (a 16-bit model from the f32 weights rounded).
  const Tensor whole = cut ? empty(shape, DType::f32) : p.master;
  if (init_std > 0) {
    ops::normal(stream_, whole, 0, init_std, ops::Philox{parameter_seed(config_.seed, layer, slot), 0});
  } else {
    ops::fill(stream_, whole, init_value);
  }
  if (cut) copy_shard(stream_, whole, p.master, sharding, tp_.ranks, tp_.rank, true);
  // Matrices feed gemms and the embedding in the model's dtype; vectors (norm weights and biases)
  // stay f32, which the norms take with 16-bit activations.
  p.value = config_.dtype != DType::f32 && p.master.rank() >= 2 ? empty(local, config_.dtype) : p.master;
  if (!p.value.same_view(p.master)) ops::copy(stream_, p.master, p.value);
  parameters_.push_back(std::move(p));
  return parameters_.back();
}

Tensor GptStage::empty(Shape shape, DType dtype) const {
  return Tensor::empty(stream_, std::move(shape), dtype);
}

// The norms, the embedding and the head are whole on every rank of a tensor-parallel group and are
// never synchronised across it: their copies stay equal only if every rank computes bit for bit the
// same, which operators that declare themselves nondeterministic (atomics, split reductions) do not.
void GptStage::require_deterministic_operators() const {
  static const H2_Op used[] = {H2_OP_GEMM,
                               H2_OP_EMBEDDING_BACKWARD,
                               H2_OP_LAYER_NORM_BACKWARD,
                               H2_OP_RMS_NORM_BACKWARD,
                               H2_OP_CROSS_ENTROPY_BACKWARD,
                               H2_OP_ATTENTION_BACKWARD};
  for (H2_Op op : used) {
    const std::string name(op_name(op));
    const std::optional<OpCapability> capability = device_.op_capability(op);
    if (capability && !capability->deterministic)
      throw Error(H2_STATUS_UNSUPPORTED, "GPT stage: tensor parallelism on " + device_.label() +
                                             " needs deterministic " + "operators, and its " + name +
                                             " is not (the group's copies of the norms, embedding and head would "
                                             "drift apart)");
  }
}

void GptStage::add_projection(const Tensor& residual, const Tensor& input, const Tensor& weight, const Tensor& out) {
  if (tp_.ranks == 1) {
    ops::copy(stream_, residual, out);
    ops::gemm(stream_, input, weight, out, {.beta = 1});
    return;
  }
  const Tensor partial = empty(out.shape());
  ops::gemm(stream_, input, weight, partial);
  sum_over_group(partial);
  ops::add(stream_, residual, partial, out);
}

void GptStage::sum_over_group(const Tensor& partial) {
  if (tp_.ranks > 1) tp_.allreduce(partial);
}

void GptStage::zero_grads() {
  ops::fill(stream_, grads_, 0);
}

void GptStage::copy_masters_to_values() {
  for (const Parameter& p : parameters_)
    if (p.master.defined() && !p.value.same_view(p.master)) ops::copy(stream_, p.master, p.value);
}

void GptStage::accumulate(const Tensor& grad, const Tensor& value) {
  ops::add(stream_, grad, value, grad);
}

void GptStage::norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                            const Tensor& mean, const Tensor& rstd) {
  if (config_.norm == Norm::layer_norm) {
    ops::layer_norm(stream_, x, weight, bias, y, mean, rstd, config_.norm_eps);
  } else {
    ops::rms_norm(stream_, x, weight, y, rstd, config_.norm_eps);
  }
}

void GptStage::norm_backward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dy, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  // Norm weights are f32 masters, so their gradients are f32 too.
  const Tensor dw = empty(weight.shape(), DType::f32);
  if (config_.norm == Norm::layer_norm) {
    const Tensor db = empty(bias.shape(), DType::f32);
    ops::layer_norm_backward(stream_, x, weight, mean, rstd, dy, dx, dw, db);
    accumulate(dbias, db);
  } else {
    ops::rms_norm_backward(stream_, x, weight, rstd, dy, dx, dw);
  }
  accumulate(dweight, dw);
}

// ---- forward ----

Tensor GptStage::forward(int micro_batch, const Tensor& input, const Tensor& targets) {
  const GptConfig& c = config_;
  if (in_flight_.count(micro_batch))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT stage: micro-batch " + std::to_string(micro_batch) +
                                                " is already in flight (forward twice without backward)");
  // The blocks cut [N, C] rows back into sequences of the configured length.
  if (input.rank() < 2 || input.size(1) != c.seq_len)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT stage: input " + input.describe() + " must be [batch, " +
                                                std::to_string(c.seq_len) + (has_embedding_ ? "]" : ", hidden]") +
                                                " (the model's seq_len)");
  if (!has_embedding_ && input.dtype() != c.dtype)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "GPT stage: input " + input.describe() + " must be " +
                                                std::string(dtype_name(c.dtype)) + ", the model's dtype");
  const int64_t batch = input.size(0), seq = input.size(1), n = batch * seq;
  auto mb = std::make_unique<MicroBatch>();
  Tensor x;
  if (has_embedding_) {
    mb->tokens = input;
    x = empty({n, c.hidden});
    ops::embedding(stream_, parameters_[embedding_].value, input.view({n}), x);
  } else {
    x = input.view({n, c.hidden});
  }
  mb->blocks.resize(blocks_.size());
  mb->recompute = recompute_;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    BlockCache& cache = mb->blocks[i];
    x = block_forward(*blocks_[i], cache, x);
    // Under recomputation a block keeps only its input; backward runs its forward again.
    if (mb->recompute) cache = BlockCache{.x = cache.x};
  }

  Tensor out;
  if (has_head_) {
    // Final norm, LM head, per-token cross-entropy.
    mb->final_in = x;
    mb->hf = empty({n, c.hidden});
    mb->meanf = empty({n}, DType::f32);
    mb->rstdf = empty({n}, DType::f32);
    norm_forward(x, parameters_[final_norm_].value,
                 final_norm_bias_ >= 0 ? parameters_[final_norm_bias_].value : Tensor(), mb->hf, mb->meanf, mb->rstdf);
    mb->logits = empty({n, c.vocab});
    ops::gemm(stream_, mb->hf, parameters_[lm_head_].value, mb->logits);
    mb->targets = targets.view({n});
    out = empty({n}, DType::f32);
    mb->lse = empty({n}, DType::f32);
    ops::cross_entropy(stream_, mb->logits, mb->targets, out, mb->lse);
  } else {
    out = x.view({batch, seq, c.hidden});
  }
  in_flight_[micro_batch] = std::move(mb);
  return out;
}

Tensor GptStage::block_forward(Block& b, BlockCache& s, const Tensor& x) {
  const GptConfig& c = config_;
  const int64_t n = x.size(0), seq = c.seq_len, batch = n / seq;
  // This rank's heads and MLP columns: all of them without tensor parallelism.
  const int64_t h = c.heads / tp_.ranks, kv = c.kv_heads / tp_.ranks, d = c.head_dim(), ffn = c.ffn / tp_.ranks;
  auto param = [&](int i) { return i >= 0 ? parameters_[i].value : Tensor(); };
  s.x = x;

  // Attention: h1 = norm1(x); q, k, v = h1 @ w_qkv; rotary on q and k; causal attention.
  s.h1 = empty({n, c.hidden});
  s.mean1 = empty({n}, DType::f32);
  s.rstd1 = empty({n}, DType::f32);
  norm_forward(x, param(b.norm1), param(b.norm1_bias), s.h1, s.mean1, s.rstd1);
  const Tensor qkv = empty({n, (h + 2 * kv) * d});
  ops::gemm(stream_, s.h1, param(b.w_qkv), qkv);
  const Tensor heads = qkv.view({batch, seq, h + 2 * kv, d});
  auto to_attention_layout = [&](const Tensor& part, int64_t count, bool rotate) {
    // [B, T, heads, D] (a strided slice) -> rotary -> [B, heads, T, D] contiguous.
    Tensor btd = empty({batch, seq, count, d});
    ops::copy(stream_, part, btd);
    if (rotate) {
      const Tensor rotated = empty({batch, seq, count, d});
      ops::rotary(stream_, btd, rotated, {c.rope_base});
      btd = rotated;
    }
    const Tensor bhtd = empty({batch, count, seq, d});
    ops::copy(stream_, btd.permute({0, 2, 1, 3}), bhtd);
    return bhtd;
  };
  s.q = to_attention_layout(heads.slice(2, 0, h), h, true);
  s.k = to_attention_layout(heads.slice(2, h, h + kv), kv, true);
  s.v = to_attention_layout(heads.slice(2, h + kv, h + 2 * kv), kv, false);
  s.o = empty({batch, h, seq, d});
  s.lse = empty({batch, h, seq}, DType::f32);
  ops::attention(stream_, s.q, s.k, s.v, s.o, s.lse, 1 / std::sqrt(static_cast<double>(d)), true);
  s.attn = empty({batch, seq, h, d});
  ops::copy(stream_, s.o.permute({0, 2, 1, 3}), s.attn);
  s.attn = s.attn.view({n, h * d});

  // x1 = x + attn @ w_o (with tensor parallelism, the sum over the group of each rank's heads' part)
  s.x1 = empty({n, c.hidden});
  add_projection(x, s.attn, param(b.w_o), s.x1);

  // MLP: y = x1 + act(norm2(x1) @ w_up [, w_gate]) @ w_down
  s.h2 = empty({n, c.hidden});
  s.mean2 = empty({n}, DType::f32);
  s.rstd2 = empty({n}, DType::f32);
  norm_forward(s.x1, param(b.norm2), param(b.norm2_bias), s.h2, s.mean2, s.rstd2);
  s.up = empty({n, ffn});
  ops::gemm(stream_, s.h2, param(b.w_up), s.up);
  s.act = empty({n, ffn});
  if (c.mlp == Mlp::swiglu) {
    s.gate = empty({n, ffn});
    ops::gemm(stream_, s.h2, param(b.w_gate), s.gate);
    ops::swiglu(stream_, s.gate, s.up, s.act);
  } else {
    ops::gelu(stream_, s.up, s.act);
  }
  const Tensor y = empty({n, c.hidden});
  add_projection(s.x1, s.act, param(b.w_down), y);
  return y;
}

// ---- backward ----

Tensor GptStage::backward(int micro_batch, const Tensor& grad_output, double loss_weight,
                          const std::function<void(int layer)>& layer_done) {
  auto done = [&](int layer) {
    if (layer_done) layer_done(layer);
  };
  const GptConfig& c = config_;
  auto found = in_flight_.find(micro_batch);
  if (found == in_flight_.end())
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "GPT stage: backward of micro-batch " + std::to_string(micro_batch) + " without its forward");
  std::unique_ptr<MicroBatch> mb = std::move(found->second);
  in_flight_.erase(found);

  Tensor dx;
  if (has_head_) {
    const int64_t n = mb->logits.size(0);
    const Tensor dloss = empty({n}, DType::f32);
    ops::fill(stream_, dloss, loss_weight);
    const Tensor dlogits = empty({n, c.vocab});
    ops::cross_entropy_backward(stream_, mb->logits, mb->targets, mb->lse, dloss, dlogits);
    Parameter& head = parameters_[lm_head_];
    ops::gemm(stream_, mb->hf, dlogits, head.grad, {.transpose_a = true, .beta = 1});
    const Tensor dhf = empty({n, c.hidden});
    ops::gemm(stream_, dlogits, head.value, dhf, {.transpose_b = true});
    dx = empty({n, c.hidden});
    const bool biased = final_norm_bias_ >= 0;
    norm_backward(mb->final_in, parameters_[final_norm_].value, biased ? parameters_[final_norm_bias_].value : Tensor(),
                  mb->meanf, mb->rstdf, dhf, dx, parameters_[final_norm_].grad,
                  biased ? parameters_[final_norm_bias_].grad : Tensor());
    done(c.layers);
  } else {
    dx = grad_output.view({grad_output.numel() / c.hidden, c.hidden});
  }
  for (size_t i = blocks_.size(); i-- > 0;) {
    BlockCache& cache = mb->blocks[i];
    if (mb->recompute) block_forward(*blocks_[i], cache, Tensor(cache.x));  // the same values as the first time
    dx = block_backward(*blocks_[i], cache, dx);
    cache = BlockCache{};  // free this block's activations before the next block's
    done(first_block_ + static_cast<int>(i));
  }
  if (has_embedding_) {
    const Tensor dweight = empty(parameters_[embedding_].grad.shape(), DType::f32);
    ops::embedding_backward(stream_, mb->tokens.view({mb->tokens.numel()}), dx, dweight);
    accumulate(parameters_[embedding_].grad, dweight);
    done(-1);
    return {};
  }
  return dx.view({dx.size(0) / c.seq_len, c.seq_len, c.hidden});
}

Tensor GptStage::block_backward(Block& b, BlockCache& s, const Tensor& dy) {
  const GptConfig& c = config_;
  const int64_t n = dy.size(0), seq = c.seq_len, batch = n / seq;
  const int64_t h = c.heads / tp_.ranks, kv = c.kv_heads / tp_.ranks, d = c.head_dim(), ffn = c.ffn / tp_.ranks;
  auto value = [&](int i) { return i >= 0 ? parameters_[i].value : Tensor(); };
  auto grad = [&](int i) { return i >= 0 ? parameters_[i].grad : Tensor(); };

  // y = x1 + act @ w_down
  ops::gemm(stream_, s.act, dy, grad(b.w_down), {.transpose_a = true, .beta = 1});
  const Tensor dact = empty({n, ffn});
  ops::gemm(stream_, dy, value(b.w_down), dact, {.transpose_b = true});
  const Tensor dh2 = empty({n, c.hidden});
  const Tensor dup = empty({n, ffn});
  if (c.mlp == Mlp::swiglu) {
    const Tensor dgate = empty({n, ffn});
    ops::swiglu_backward(stream_, s.gate, s.up, dact, dgate, dup);
    ops::gemm(stream_, s.h2, dgate, grad(b.w_gate), {.transpose_a = true, .beta = 1});
    ops::gemm(stream_, dgate, value(b.w_gate), dh2, {.transpose_b = true});
    ops::gemm(stream_, dup, value(b.w_up), dh2, {.transpose_b = true, .beta = 1});
  } else {
    ops::gelu_backward(stream_, s.up, dact, dup);
    ops::gemm(stream_, dup, value(b.w_up), dh2, {.transpose_b = true});
  }
  ops::gemm(stream_, s.h2, dup, grad(b.w_up), {.transpose_a = true, .beta = 1});
  sum_over_group(dh2);  // each rank's columns contributed a part
  // dx1 = dy + norm2'(dh2)
  const Tensor dx1 = empty({n, c.hidden});
  norm_backward(s.x1, value(b.norm2), value(b.norm2_bias), s.mean2, s.rstd2, dh2, dx1, grad(b.norm2),
                grad(b.norm2_bias));
  accumulate(dx1, dy);

  // x1 = x + attn @ w_o
  ops::gemm(stream_, s.attn, dx1, grad(b.w_o), {.transpose_a = true, .beta = 1});
  const Tensor dattn = empty({n, h * d});
  ops::gemm(stream_, dx1, value(b.w_o), dattn, {.transpose_b = true});
  const Tensor dout = empty({batch, h, seq, d});
  ops::copy(stream_, dattn.view({batch, seq, h, d}).permute({0, 2, 1, 3}), dout);
  const Tensor dq = empty({batch, h, seq, d}), dk = empty({batch, kv, seq, d}), dv = empty({batch, kv, seq, d});
  ops::attention_backward(stream_, s.q, s.k, s.v, s.o, s.lse, dout, dq, dk, dv, 1 / std::sqrt(static_cast<double>(d)),
                          true);
  // Back to [B, T, heads, D], through rotary's backward for q and k, into one dqkv.
  const Tensor dqkv = empty({batch, seq, h + 2 * kv, d});
  auto from_attention_layout = [&](const Tensor& bhtd, int64_t begin, int64_t count, bool rotate) {
    const Tensor target = dqkv.slice(2, begin, begin + count);
    if (!rotate) {
      ops::copy(stream_, bhtd.permute({0, 2, 1, 3}), target);
      return;
    }
    const Tensor btd = empty({batch, seq, count, d});
    ops::copy(stream_, bhtd.permute({0, 2, 1, 3}), btd);
    const Tensor unrotated = empty({batch, seq, count, d});
    ops::rotary_backward(stream_, btd, unrotated, {c.rope_base});
    ops::copy(stream_, unrotated, target);
  };
  from_attention_layout(dq, 0, h, true);
  from_attention_layout(dk, h, kv, true);
  from_attention_layout(dv, h + kv, kv, false);
  const Tensor dqkv2 = dqkv.view({n, (h + 2 * kv) * d});
  ops::gemm(stream_, s.h1, dqkv2, grad(b.w_qkv), {.transpose_a = true, .beta = 1});
  const Tensor dh1 = empty({n, c.hidden});
  ops::gemm(stream_, dqkv2, value(b.w_qkv), dh1, {.transpose_b = true});
  sum_over_group(dh1);
  // dx = dx1 + norm1'(dh1)
  const Tensor dx = empty({n, c.hidden});
  norm_backward(s.x, value(b.norm1), value(b.norm1_bias), s.mean1, s.rstd1, dh1, dx, grad(b.norm1), grad(b.norm1_bias));
  accumulate(dx, dx1);
  s = BlockCache{};  // free this micro-batch's activations as soon as they are used
  return dx;
}

}  // namespace h2::heteropp
