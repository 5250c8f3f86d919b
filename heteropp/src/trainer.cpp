#include "h2/heteropp/trainer.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>

#include "gradient_sync.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/schedule.hpp"
#include "h2/heteropp/checkpoint.hpp"
#include "h2/heteropp/corpus.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/memory.hpp"
#include "pass_timer.hpp"
#include "pipeline_messages.hpp"
#include "rank_checkpoints.hpp"
#include "sharded_adamw.hpp"
#include "step_statistics.hpp"

namespace h2::heteropp {

namespace {

namespace fs = std::filesystem;
using Clock = Timeline::Clock;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Linear warm-up to the peak, then a cosine down to min_lr at the last step.
double learning_rate(const TrainOptions& o, int64_t step) {
  if (step <= o.warmup_steps) return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

// A resumed run continues metrics.jsonl from its checkpoint's step: the rows after it are of the run
// that went on past that checkpoint (and crashed, or was abandoned), and would otherwise stand twice
// for the same steps with other numbers. A line that is not a step's row (cut off by a crash) goes too.
void keep_metrics_up_to(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;  // a new --out
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_object() && row.contains("step") && row["step"].is_number_integer() &&
        row["step"].get<int64_t>() <= step)
      kept += line + "\n";
  }
  write_file_atomically(path, kept);
}

class RankTrainer {
 public:
  RankTrainer(const heteroauto::Plan& plan, const TrainOptions& options, const dicomm::Communicator& world,
              const Device& device)
      : plan_(plan),
        options_(options),
        world_(world),
        device_(device),
        stream_(device.create_stream()),
        placement_(place(plan)),
        role_(placement_.roles.at(static_cast<size_t>(world.rank()))),
        timeline_(world.rank(),
                  "rank " + std::to_string(world.rank()) + ": " + role_.describe() + " on " + device.label()) {
    if (placement_.world_size() != world.size())
      throw Error(H2_STATUS_INVALID_ARGUMENT, "the plan has " + std::to_string(placement_.world_size()) +
                                                  " ranks but the job has " + std::to_string(world.size()));
    if (options.steps < 1 || options.warmup_steps < 0 || !(options.lr > 0) || options.min_lr < 0 ||
        options.clip_norm < 0 || options.keep_checkpoints < 1)
      throw Error(H2_STATUS_INVALID_ARGUMENT,
                  "training options out of range (steps >= 1, lr > 0, min_lr >= 0, "
                  "warmup >= 0, clip >= 0, keep >= 1)");
    const heteroauto::PlanStage& stage =
        plan.pipelines[static_cast<size_t>(role_.pipeline)].stages[static_cast<size_t>(role_.stage)];

    seed_ = options.seed;
    state_.seed = seed_;
    state_.loss_scale = options.loss_scaling.enabled ? options.loss_scaling.initial : 1;
    if (!options.resume.empty()) resume_from_ = find_checkpoint(options.resume);
    if (!resume_from_.empty()) {
      resumed_ = read_manifest(resume_from_);
      state_ = resumed_;
      check_same_architecture(state_.model, plan.model, resume_from_);
      seed_ = state_.seed;
    }
    state_.model = heteroauto::to_json(plan.model);
    state_.plan = heteroauto::to_json(plan);

    // Every rank takes part in the split (a collective over the world); ranks of one stage's
    // tensor-parallel group share the colour of its lowest rank.
    const bool any_tp =
        std::any_of(placement_.roles.begin(), placement_.roles.end(), [](const StageRole& r) { return r.tp > 1; });
    if (any_tp) tp_comm_ = world_.split(role_.tp > 1 ? role_.tp_ranks.front() : -1, role_.tp_rank);
    TensorParallel tp{role_.tp, role_.tp_rank, {}};
    if (role_.tp > 1)
      tp.allreduce = [this](const Tensor& t) {
        // Blocks until the group's sum is done, so the event spans the transfer and the wait for the
        // slowest member (nested inside its forward or backward in the timeline).
        const Clock::time_point start = Clock::now();
        tp_comm_.allreduce(stream_, t, dicomm::ReduceOp::sum);
        timeline_.add("allreduce tensor-parallel", "comm", start, Clock::now(), {{"elements", t.numel()}});
      };
    model_ = std::make_unique<GptStage>(GptConfig::from_model(plan.model, seed_), role_.first_block, role_.end_block,
                                        role_.first(), role_.last(), device_, stream_, std::move(tp));
    model_->set_recompute(stage.recompute == heteroauto::Recompute::full);
    // Collective over the world (its groups' communicators), as the split above.
    gradient_sync_ = std::make_unique<GradientSync>(placement_, plan.model, world_, *model_, stream_, timeline_,
                                                    options.gradient_sync);
    const AdamWSettings adamw{
        .beta1 = options.beta1, .beta2 = options.beta2, .eps = options.eps, .weight_decay = options.weight_decay};
    // With the sharded optimizer, AdamW keeps the parameters no other rank sums (a layer one rank holds).
    optimizer_ =
        std::make_unique<AdamW>(*model_, stream_, adamw, [this](size_t i) { return !gradient_sync_->in_slices(i); });
    if (gradient_sync_->sharded())
      sharded_optimizer_ = std::make_unique<ShardedAdamW>(*model_, *gradient_sync_, stream_, timeline_, adamw);
    // A resumed run reads the checkpoint's files, whatever --data says, so its data order continues.
    if (state_.data_files.empty())
      state_.data_files = options.data_files.empty() ? ByteCorpus::default_files() : options.data_files;
    if (role_.first() || role_.last())
      corpus_ = std::make_unique<ByteCorpus>(
          ByteCorpus::from_files(state_.data_files, static_cast<size_t>(plan.model.seq_len) + 1));
    messages_ = std::make_unique<PipelineMessages>(
        world_, stream_, timeline_, Shape{placement_.micro_batch_size, plan.model.seq_len, plan.model.hidden},
        model_->config().dtype, role_.micro_batches);
    checkpoints_ = std::make_unique<RankCheckpoints>(placement_, world_, tp_comm_, *model_, *optimizer_,
                                                     sharded_optimizer_.get(), stream_, timeline_);
    if (!resume_from_.empty()) checkpoints_->load(resume_from_, resumed_);
    found_inf_ = Tensor::empty(stream_, {1}, DType::f32);
    norm_ = Tensor::empty(stream_, {1}, DType::f32);
    loss_sum_ = Tensor::empty(stream_, {1}, DType::f32);
  }

  TrainResult run(const std::function<void(const StepReport&)>& on_step) {
    TrainResult result;
    result.first_step = state_.step + 1;
    std::ofstream metrics;
    if (!options_.out_dir.empty() && world_.rank() == 0) {
      fs::create_directories(options_.out_dir);
      const std::string path = (fs::path(options_.out_dir) / "metrics.jsonl").string();
      if (!resume_from_.empty()) keep_metrics_up_to(path, state_.step);
      metrics.open(path, resume_from_.empty() ? std::ios::trunc : std::ios::app);
      if (!metrics) throw Error(H2_STATUS_INTERNAL, "cannot write " + path);
    }
    while (state_.step < options_.steps) {
      const StepReport report = run_step(state_.step + 1);
      result.steps.push_back(report);
      if (metrics.is_open() && !(metrics << step_report_json(report, placement_).dump() << std::endl))
        throw Error(H2_STATUS_INTERNAL, "cannot write " + (fs::path(options_.out_dir) / "metrics.jsonl").string() +
                                            ": " + std::strerror(errno));
      if (on_step) on_step(report);
      const bool last = state_.step == options_.steps;
      if (!options_.out_dir.empty() &&
          (last || (options_.checkpoint_every > 0 && state_.step % options_.checkpoint_every == 0)))
        result.checkpoint = checkpoints_->save(options_.out_dir, state_, options_.keep_checkpoints);
    }
    if (!options_.out_dir.empty()) write_timeline();
    return result;
  }

 private:
  // ---- one training step ----

  StepReport run_step(int64_t step) {
    const Clock::time_point start = Clock::now();
    busy_s_ = previous_optimizer_s_;  // busy, and on the clock, as the step's report says (below)
    memory_used_ = 0;
    reset_peak_memory_stats(device_);
    plugin_allocations_ = memory_stats(device_).plugin_allocations;
    passes_.begin_step(stream_);
    model_->zero_grads();
    ops::fill(stream_, loss_sum_, 0);

    const double global_tokens =
        static_cast<double>(placement_.global_micro_batches) * placement_.micro_batch_size * plan_.model.seq_len;
    gradient_sync_->begin_step();
    run_pipeline(state_.loss_scale / global_tokens);
    busy_s_ += passes_.finish_step(timeline_);
    gradient_times_ = gradient_sync_->finish();

    // Under loss scaling, unscale and look for overflow; then this rank's share of the global norm:
    // the layers it owns (each layer counted once, however many replicas hold it).
    double found_inf = 0;
    if (options_.loss_scaling.enabled) {
      ops::fill(stream_, found_inf_, 0);
      std::vector<Tensor> grads = {model_->flat_grads()};
      if (sharded_optimizer_)
        for (const Tensor& g : sharded_optimizer_->gradients()) grads.push_back(g);
      ops::unscale(stream_, grads, found_inf_, 1 / state_.loss_scale);
      found_inf = found_inf_.to_host(stream_).at(0);
    }
    std::vector<Tensor> owned;
    for (size_t i = 0; i < model_->parameters().size(); ++i)
      if (!gradient_sync_->in_slices(i) && counts_for_norm(model_->parameters()[i]))
        owned.push_back(model_->parameters()[i].grad);
    // Sharded: the sums are in the slices, each element in one rank's.
    if (sharded_optimizer_)
      for (const Tensor& g : sharded_optimizer_->counted_gradients()) owned.push_back(g);
    double squared_norm = 0;
    if (!owned.empty()) {
      ops::grad_norm(stream_, owned, norm_);
      const double norm = norm_.to_host(stream_).at(0);
      squared_norm = norm * norm;
    }

    RankContribution mine;
    // A last stage's tensor-parallel ranks compute the same losses; one of them counts.
    mine.loss_sum = role_.last() && role_.tp_rank == 0 ? loss_sum_.to_host(stream_).at(0) : 0;
    mine.squared_norm = squared_norm;
    mine.found_inf = found_inf > 0;
    mine.stats.busy_s = busy_s_;
    mine.stats.memory_used = memory_used_;
    mine.stats.memory_total = static_cast<double>(device_.memory_info().total_bytes);
    const MemoryStats memory = memory_stats(device_);
    mine.stats.peak_allocated = static_cast<double>(memory.peak_allocated_bytes);
    mine.stats.peak_reserved = static_cast<double>(memory.peak_reserved_bytes);
    mine.stats.plugin_allocations = static_cast<double>(memory.plugin_allocations - plugin_allocations_);
    mine.stats.gradient_comm_s = gradient_times_.comm_s;
    mine.stats.exposed_comm_s = gradient_times_.exposed_s;
    mine.stats.optimizer_state =
        static_cast<double>(optimizer_->state_bytes() + (sharded_optimizer_ ? sharded_optimizer_->state_bytes() : 0));
    // The step's clock: from its start to here, plus the previous step's optimizer (with the
    // distributed optimizer, its weights' gather too), which ran after that step's report was
    // exchanged. In a steady run that is the time from one step's start to the next's, which is what
    // HeteroAuto predicts.
    mine.step_s = seconds(start, Clock::now()) + previous_optimizer_s_;
    const StepTotals totals = exchange_step_statistics(world_, stream_, timeline_, mine);

    StepReport report;
    report.step = step;
    report.steps = options_.steps;
    report.lr = learning_rate(options_, step);
    report.loss_scale = state_.loss_scale;
    report.seconds = totals.seconds;
    report.loss = totals.loss_sum / global_tokens;
    report.grad_norm = std::sqrt(totals.squared_norm);
    report.skipped = options_.loss_scaling.enabled && (totals.found_inf || !std::isfinite(report.grad_norm));
    if (!report.skipped && !std::isfinite(report.grad_norm))
      throw Error(H2_STATUS_INTERNAL, "step " + std::to_string(step) + ": the global gradient norm is " +
                                          std::to_string(report.grad_norm) + " (loss " + std::to_string(report.loss) +
                                          "); lower --lr, or train with loss scaling");

    const Clock::time_point optimizer_start = Clock::now();
    if (!report.skipped) optimizer_step(report);
    update_loss_scale(report.skipped);
    stream_.synchronize();
    const Clock::time_point end = Clock::now();
    previous_optimizer_s_ = seconds(optimizer_start, end);
    timeline_.add(report.skipped ? "optimizer (skipped: overflow)" : "optimizer", "optimizer", optimizer_start, end,
                  {{"step", step}, {"lr", report.lr}, {"grad_norm", report.grad_norm}});

    // The report's per-rank numbers were exchanged before the optimizer ran: its time counts in the
    // next step's report, busy and on the clock.
    report.ranks = totals.ranks;
    report.tokens_per_s = report.seconds > 0 ? global_tokens / report.seconds : 0;
    state_.step = step;
    state_.samples += static_cast<int64_t>(placement_.global_micro_batches) * placement_.micro_batch_size;
    return report;
  }

  // The stage's forward and backward passes in schedule order. A stage receives its input from the
  // previous stage and sends its output on (PipelineMessages).
  void run_pipeline(double loss_weight) {
    const std::vector<heteroauto::PassStep> schedule =
        heteroauto::stage_schedule(options_.schedule, role_.stage, role_.stages, role_.micro_batches);
    // The step's last backward pass leaves each layer's gradients final: their sums start behind it.
    const auto last_backward =
        std::find_if(schedule.rbegin(), schedule.rend(), [](const heteroauto::PassStep& p) { return !p.forward; });
    for (const heteroauto::PassStep& pass : schedule) {
      const int j = pass.micro_batch;
      if (pass.forward) {
        Tensor input, targets;
        if (role_.first() || role_.last())
          load_batch(j, role_.first() ? &input : nullptr, role_.last() ? &targets : nullptr);
        if (!role_.first()) input = messages_->receive_activations(j, role_.prev_rank);
        passes_.start(stream_);
        Tensor output = model_->forward(j, input, targets);
        if (role_.last()) ops::add(stream_, loss_sum_, sum_of(output), loss_sum_);
        compute_done("forward", j);
        for (int peer : role_.send_next) messages_->send_activations(output, peer, j);
      } else {
        Tensor grad_output;
        if (!role_.last()) grad_output = messages_->receive_gradients(j, role_.next_rank);
        passes_.start(stream_);
        const bool last = last_backward != schedule.rend() && &pass == &*last_backward;
        const std::function<void(int)> layer_done = [this](int layer) { gradient_sync_->layer_done(layer); };
        Tensor grad_input = model_->backward(j, grad_output, loss_weight, last ? layer_done : nullptr);
        compute_done("backward", j);
        for (int peer : role_.send_prev) messages_->send_gradients(grad_input, peer, j);
      }
    }
    messages_->finish_step();
  }

  // Whether this rank's gradient of `p` enters the global norm: each layer is counted on one replica
  // (its owner's), a shard on every rank of the owner's tensor-parallel group, a whole parameter on the
  // owner only.
  bool counts_for_norm(const Parameter& p) const {
    if (p.sharding.sharded() && role_.tp > 1) {
      const std::vector<int>& group = placement_.owner_group(p.layer);
      return std::find(group.begin(), group.end(), world_.rank()) != group.end();
    }
    return placement_.owner(p.layer) == world_.rank();
  }

  // AdamW with the global-norm clip folded into the gradient scale.
  void optimizer_step(const StepReport& report) {
    ++state_.optimizer_steps;
    const double clip = options_.clip_norm > 0 && report.grad_norm > options_.clip_norm
                            ? options_.clip_norm / (report.grad_norm + 1e-6)
                            : 1.0;
    optimizer_->step(report.lr, clip, state_.optimizer_steps);
    if (sharded_optimizer_) sharded_optimizer_->step(report.lr, clip, state_.optimizer_steps);
  }

  void update_loss_scale(bool overflow) {
    if (!options_.loss_scaling.enabled) return;
    if (overflow) {
      state_.loss_scale = std::max(1.0, state_.loss_scale / 2);
      state_.good_steps = 0;
    } else if (++state_.good_steps >= options_.loss_scaling.growth_interval) {
      state_.loss_scale *= 2;
      state_.good_steps = 0;
    }
  }

  // ---- helpers of the step ----

  // Micro-batch j of this replica: samples [samples + (first_micro_batch + j) * size, ... + size).
  void load_batch(int j, Tensor* tokens, Tensor* targets) {
    const int64_t size = placement_.micro_batch_size, seq = plan_.model.seq_len;
    std::vector<double> inputs, next, all_inputs, all_targets;
    const int64_t first = state_.samples + (role_.first_micro_batch + j) * size;
    for (int64_t i = 0; i < size; ++i) {
      corpus_->sample(static_cast<uint64_t>(first + i), seq, seed_, inputs, next);
      all_inputs.insert(all_inputs.end(), inputs.begin(), inputs.end());
      all_targets.insert(all_targets.end(), next.begin(), next.end());
    }
    if (tokens) *tokens = Tensor::from_host(stream_, all_inputs, {size, seq}, DType::i64);
    if (targets) *targets = Tensor::from_host(stream_, all_targets, {size, seq}, DType::i64);
  }

  Tensor sum_of(const Tensor& losses) {
    Tensor sum = Tensor::empty(stream_, {1}, DType::f32);
    ops::reduce(stream_, ops::ReduceOp::sum, losses, {0}, sum, true);
    return sum;
  }

  // The pass is enqueued, not finished: PassTimer reads its time at the end of the pipeline.
  void compute_done(const char* what, int j) {
    memory_used_ = std::max(memory_used_, used_memory());
    passes_.stop(stream_, std::string(what) + " " + std::to_string(j), j);
  }

  double used_memory() const {
    const MemoryInfo info = device_.memory_info();
    return static_cast<double>(info.total_bytes - std::min(info.free_bytes, info.total_bytes));
  }

  // ---- output ----

  // Each rank writes its events; rank 0 merges them into one trace once all are written.
  void write_timeline() {
    const fs::path dir = fs::path(options_.out_dir) / "trace";
    fs::create_directories(dir);
    const fs::path mine = dir / ("rank-" + std::to_string(world_.rank()) + ".json");
    write_file_atomically(mine.string(), timeline_.events().dump());
    world_.barrier();
    if (world_.rank() != 0) return;
    std::vector<nlohmann::json> ranks;
    for (int r = 0; r < world_.size(); ++r) {
      const fs::path path = dir / ("rank-" + std::to_string(r) + ".json");
      std::ifstream in(path);
      try {
        ranks.push_back(nlohmann::json::parse(in));
      } catch (const nlohmann::json::exception& e) {
        // Every rank wrote its file whole before the barrier; a bad one was changed since.
        throw Error(H2_STATUS_INTERNAL, "cannot merge the timeline: " + path.string() + ": " + e.what());
      }
    }
    write_file_atomically((fs::path(options_.out_dir) / "trace.json").string(), Timeline::merge(ranks).dump());
    fs::remove_all(dir);
  }

  const heteroauto::Plan& plan_;
  const TrainOptions& options_;
  const dicomm::Communicator& world_;
  Device device_;
  Stream stream_;
  PassTimer passes_{device_};
  Placement placement_;
  StageRole role_;
  Timeline timeline_;
  CheckpointState state_;
  std::string resume_from_;
  CheckpointState resumed_;  // resume_from_'s manifest
  uint64_t seed_ = 0;
  std::unique_ptr<GptStage> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<ShardedAdamW> sharded_optimizer_;  // with --distributed-optimizer
  std::unique_ptr<ByteCorpus> corpus_;
  std::unique_ptr<RankCheckpoints> checkpoints_;
  std::unique_ptr<PipelineMessages> messages_;
  std::unique_ptr<GradientSync> gradient_sync_;
  GradientSync::StepTimes gradient_times_;
  dicomm::Communicator tp_comm_;  // the stage's tensor-parallel group (invalid without one)
  Tensor found_inf_, norm_, loss_sum_;
  double busy_s_ = 0, memory_used_ = 0;
  double previous_optimizer_s_ = 0;  // the last optimizer step's time, counted in the next step's clock
  uint64_t plugin_allocations_ = 0;  // the allocator's count at the start of the step
};

}  // namespace

TrainResult train(const heteroauto::Plan& plan, const TrainOptions& options, const dicomm::Communicator& world,
                  const Device& device, const std::function<void(const StepReport&)>& on_step) {
  RankTrainer trainer(plan, options, world, device);
  try {
    return trainer.run(on_step);
  } catch (const std::exception& e) {
    // Before the trainer goes: its gradient thread may be inside a sum that only an abort ends (a
    // peer's failure has ended it already).
    world.abort_after(e);
    throw;
  }
}

}  // namespace h2::heteropp
