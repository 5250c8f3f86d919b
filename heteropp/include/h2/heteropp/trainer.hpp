// HeteroPP's training loop for one rank: the rank's stage of a HeteroAuto plan, driven by a 1F1B (or
// GPipe) schedule, with activations and gradients exchanged over DiComm point-to-point, each layer's
// gradients summed over every replica that holds it, a global gradient-norm clip, AdamW, optional
// dynamic loss scaling, per-layer checkpoints and a Chrome-trace timeline.
//
// Every rank of the job calls train() with the same plan and options. The result of a step does not
// depend on the plan: each token's loss is weighted 1 / (global batch x sequence length) and the
// gradients are summed over replicas, so any split of the global batch over replicas and
// micro-batches, and any split of the layers over stages, trains the same model up to the order of
// floating-point sums.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "h2/device.hpp"
#include "h2/dicomm/communicator.hpp"
#include "h2/dtype.hpp"
#include "h2/heteroauto/plan.hpp"
#include "h2/heteroauto/simulator.hpp"

namespace h2::heteropp {

struct LossScaling {
  bool enabled = false;            // dynamic loss scaling (for f16 training)
  double initial = 65536;          // the first scale
  int64_t growth_interval = 2000;  // steps without overflow before the scale doubles
};

// How each layer's gradients are summed over the replicas that hold it (Megatron's overlapped grad
// reduce, PyTorch DDP's buckets).
struct GradientSyncOptions {
  // Sum a bucket as soon as the step's last backward pass has made its layers' gradients, on a
  // thread of its own, while the pass goes on; false: every sum after the pipeline.
  bool overlap = true;
  // Whole layers per bucket, up to this many bytes of f32 gradients (at least one layer each): fewer,
  // larger messages against an earlier start.
  size_t bucket_bytes = size_t{1} << 20;
  // f16 or bf16: gradients travel in 16 bits (half the bytes), each collective sums in f32 and rounds
  // once; f32: exact to the order of the sums.
  DType comm_dtype = DType::f32;
  // ZeRO-1: reduce-scatter the sums instead of all-reducing them, and shard AdamW's moments (and the
  // update of the f32 masters) over each layer's holders; the updated weights are gathered back after
  // it, in the model's dtype.
  bool shard_optimizer = false;
};

struct TrainOptions {
  int64_t steps = 100;   // train until this many steps are done (a resumed run continues to it)
  double lr = 3e-3;      // peak learning rate, reached after `warmup_steps` (linear), then cosine
  double min_lr = 3e-4;  // to this at the last step
  int64_t warmup_steps = 10;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // on matrices only, not on norms, biases
  double clip_norm = 1.0;     // global gradient norm; 0: no clipping
  uint64_t seed = 1234;       // weights and data order (a resumed run takes the checkpoint's)
  heteroauto::Schedule schedule = heteroauto::Schedule::one_f_one_b;
  LossScaling loss_scaling;
  std::vector<std::string> data_files;  // empty: ByteCorpus::default_files()
  std::string out_dir;                  // metrics.jsonl, trace.json, checkpoints/; "": none written
  int64_t checkpoint_every = 0;         // steps; 0: only after the last step (when out_dir is set)
  int keep_checkpoints = 2;
  std::string resume;  // a checkpoint root or step directory; "": start from the seed
  GradientSyncOptions gradient_sync;
};

struct RankStepStats {
  double busy_s = 0;       // forward, backward and optimizer compute
  double bubble = 0;       // 1 - busy / step time
  double memory_used = 0;  // bytes, the most seen during the step
  double memory_total = 0;
  double peak_allocated = 0;      // bytes held by tensors at the step's peak (h2::memory_stats)
  double peak_reserved = 0;       // bytes the caching allocator held from the plugin at its peak
  double plugin_allocations = 0;  // plugin allocations during the step: 0 once the cache is warm
  double gradient_comm_s = 0;     // the gradient sums' time, from each bucket's start to its end
  double exposed_comm_s = 0;      // of it, the time the step waited for them after its pipeline
  double optimizer_state = 0;     // bytes of AdamW moments this rank keeps (a share of them when sharded)
};

struct StepReport {
  int64_t step = 0;  // 1-based
  int64_t steps = 0;
  double loss = 0;  // mean per-token loss of the global batch
  double grad_norm = 0;
  double lr = 0;
  double loss_scale = 1;
  bool skipped = false;  // overflow under loss scaling: no update
  double seconds = 0;    // wall time of the step (slowest rank)
  double tokens_per_s = 0;
  std::vector<RankStepStats> ranks;  // by world rank
};

struct TrainResult {
  std::vector<StepReport> steps;  // those run by this call (every rank has the same numbers)
  int64_t first_step = 1;         // > 1 when resumed
  std::string checkpoint;         // the last checkpoint written, "" if none
};

// Runs the rank's part of the plan. `device` is this rank's device. Calls `on_step` on every rank
// after every step. Throws h2::Error (bad plan, checkpoint mismatch, non-finite loss without loss
// scaling) or dicomm::CommError (a peer failed), after telling the other ranks
// (Communicator::abort_after).
TrainResult train(const heteroauto::Plan& plan, const TrainOptions& options, const dicomm::Communicator& world,
                  const Device& device, const std::function<void(const StepReport&)>& on_step = {});

}  // namespace h2::heteropp
