// A GPT decoder written against the core's operators only, forward and backward by hand, cut into
// pipeline stages by layer: a stage holds transformer blocks [first_block, end_block), plus the
// token embedding if it is the first stage and the final norm, LM head and loss if it is the last.
// One process, one device, one stage; a single-device run is the stage that holds everything.
//
// Each block: x + attention(norm1(x)), then + mlp(norm2(.)). Attention is causal with rotary
// position embeddings (grouped KV heads allowed); the MLP is GELU or SwiGLU; norms are RMSNorm or
// LayerNorm. Weights are stored [in, out], so a linear layer is y = x @ W.
//
// Activations are kept per micro-batch id between forward and backward, so a 1F1B schedule may
// have several micro-batches in flight. Gradients accumulate over micro-batches until zero_grads().
//
// Precision: the model computes in GptConfig::dtype. In f16 or bf16 the matrices (embedding,
// projections, LM head) have a 16-bit copy that forward and backward read, next to an f32 master
// that the optimizer updates; activations and the messages between stages are 16-bit; norm weights,
// norm statistics, the loss and every gradient of a parameter stay f32 (gemm accumulates the 16-bit
// products into the f32 gradients directly, as the ABI allows).
//
// Tensor parallelism (Megatron-LM's): with TensorParallel::ranks > 1 each rank of the group holds
// its share of every block's heads and MLP columns (sharding.hpp) and the group sums partial results
// twice per block in forward (after w_o and after w_down) and twice in backward (the inputs'
// gradients of w_qkv and of w_up/w_gate). Norms, the embedding and the head are whole on every rank,
// which computes them alike. Every shard is cut from the same full initial weights.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "h2/h2.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/sharding.hpp"

namespace h2::heteropp {

struct GptConfig {
  int layers = 0;  // transformer blocks
  int64_t hidden = 0, ffn = 0, heads = 0, kv_heads = 0, seq_len = 0, vocab = 0;
  heteroauto::Mlp mlp = heteroauto::Mlp::gelu;
  heteroauto::Norm norm = heteroauto::Norm::rms_norm;
  double rope_base = 10000;
  double norm_eps = 1e-5;
  uint64_t seed = 1234;      // with the layer index, the only input to the initial weights
  DType dtype = DType::f32;  // what forward and backward compute in: f32, f16 or bf16

  int64_t head_dim() const { return hidden / heads; }
  static GptConfig from_model(const heteroauto::Model& model, uint64_t seed);
};

// A trainable tensor and its gradient, named for checkpoints and errors.
struct Parameter {
  std::string name;         // e.g. "block.3.w_qkv": the layer index is part of it, not the stage
  int layer = 0;            // the block's index; -1 for the embedding, `layers` for the final norm and head
  Tensor master;            // f32: what the optimizer updates and checkpoints hold (undefined where the
                            // distributed optimizer keeps it in slices: a 16-bit matrix's)
  Tensor value;             // what forward reads: the master itself, or its 16-bit copy (matrices of a 16-bit model)
  Tensor grad;              // f32, the master's shape (this rank's shard under tensor parallelism)
  Sharding sharding;        // how the whole parameter is cut over a tensor-parallel group (also when there is none)
  Shape full_shape;         // the whole parameter's shape (the master's, without tensor parallelism)
  int64_t grad_offset = 0;  // where `grad` starts in GptStage::flat_grads()
};

// This rank's place in its stage's tensor-parallel group, and the group's sum: `allreduce` must
// replace the tensor with its sum over the group's ranks, ordered on the stage's stream.
struct TensorParallel {
  int ranks = 1, rank = 0;
  std::function<void(const Tensor&)> allreduce;
};

class GptStage {
 public:
  // Builds and initialises the stage's parameters on `device`; `stream` orders all its work.
  GptStage(const GptConfig& config, int first_block, int end_block, bool has_embedding, bool has_head,
           const Device& device, Stream& stream, TensorParallel tp = {});
  ~GptStage();
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  // input: tokens i64 [batch, seq] on the first stage, else activations [batch, seq, hidden] in the
  // model's dtype.
  // targets: i64 [batch, seq], needed on the last stage. Returns the activations for the next
  // stage, or on the last stage the per-token losses f32 [batch * seq]. Keeps what backward needs
  // under `micro_batch`.
  Tensor forward(int micro_batch, const Tensor& input, const Tensor& targets = {});
  // grad_output: the gradient of the activations returned by forward (not used on the last stage,
  // where each token's loss gets weight `loss_weight`, e.g. 1 / tokens in the global batch).
  // Accumulates into the parameters' gradients and returns the gradient of forward's input
  // (undefined on the first stage). Frees what forward kept for `micro_batch`. `layer_done`, when
  // given, is called with each layer's index as soon as the work that accumulates that layer's
  // gradients has been enqueued (the head's first, the embedding's last), so that the sums over
  // replicas can start while the rest of the pass runs.
  Tensor backward(int micro_batch, const Tensor& grad_output, double loss_weight = 1,
                  const std::function<void(int layer)>& layer_done = {});

  // Full activation recomputation: forward keeps only each block's input, and backward runs the
  // block's forward again first (one more forward of compute for a block's activations of memory).
  // Results are the same as without it. Applies to micro-batches forwarded after the call.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  std::vector<Parameter>& parameters() { return parameters_; }
  // Every parameter's gradient, one after the other in parameter order (f32, 1-D).
  const Tensor& flat_grads() const { return grads_; }
  void zero_grads();
  // Rounds every master into its 16-bit copy (after the masters were written, e.g. from a checkpoint).
  void copy_masters_to_values();
  bool has_embedding() const { return has_embedding_; }
  bool has_head() const { return has_head_; }
  const GptConfig& config() const { return config_; }
  const TensorParallel& tensor_parallel() const { return tp_; }

 private:
  struct Block;
  struct BlockCache;
  struct MicroBatch;

  Tensor block_forward(Block& block, BlockCache& cache, const Tensor& x);
  Tensor block_backward(Block& block, BlockCache& cache, const Tensor& dy);
  void norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                    const Tensor& rstd);
  void norm_backward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& mean, const Tensor& rstd,
                     const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
  // grad += value, for operators that overwrite their gradient output.
  void accumulate(const Tensor& grad, const Tensor& value);
  Tensor empty(Shape shape) const { return empty(std::move(shape), config_.dtype); }  // an activation
  Tensor empty(Shape shape, DType dtype) const;
  Parameter& add_parameter(const std::string& name, int layer, Shape shape, double init_std, double init_value = 0,
                           Sharding sharding = {});
  // out = residual + input @ weight, for a row-parallel weight: the product summed over the group.
  void add_projection(const Tensor& residual, const Tensor& input, const Tensor& weight, const Tensor& out);
  void require_deterministic_operators() const;
  // Sums a partial result over the tensor-parallel group (nothing without one).
  void sum_over_group(const Tensor& partial);

  GptConfig config_;
  int first_block_, end_block_;
  bool has_embedding_, has_head_;
  Device device_;
  Stream& stream_;
  std::vector<Parameter> parameters_;
  Tensor grads_;  // the storage of every Parameter::grad
  std::vector<std::unique_ptr<Block>> blocks_;
  // Indices into parameters_ of the embedding and the head (-1 when absent).
  int embedding_ = -1, final_norm_ = -1, final_norm_bias_ = -1, lm_head_ = -1;
  std::map<int, std::unique_ptr<MicroBatch>> in_flight_;
  bool recompute_ = false;
  TensorParallel tp_;
};

}  // namespace h2::heteropp
