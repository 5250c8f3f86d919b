#include "train_command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli_checks.hpp"
#include "device_direct_check.hpp"
#include "format.hpp"
#include "h2/dicomm/bootstrap.hpp"
#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/search.hpp"
#include "h2/heteropp/checkpoint.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/trainer.hpp"
#include "launch_command.hpp"
#include "local_cluster.hpp"
#include "plan_command.hpp"
#include "plan_print.hpp"
#include "plugin_option_args.hpp"
#include "profile_command.hpp"
#include "table.hpp"
#include "train_job.hpp"

namespace h2::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "h2 train";

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// --plugin-option's values; a key given twice is a usage error, like a malformed one.
PluginOptionsByName plugin_options_of(const TrainCommandOptions& options) {
  try {
    return parse_plugin_options(options.plugin_options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// The plan, checked against the cluster and against --model: a plan made for another model used to
// train that model silently, whatever --model said.
heteroauto::Plan read_plan(const std::string& path, const heteroauto::Cluster& cluster,
                           const TrainCommandOptions& options, const heteroauto::Model& model) {
  heteroauto::Plan plan = heteroauto::load_plan(path);
  try {
    heteroauto::check_plan_invariants(plan, cluster);
  } catch (const heteroauto::DescriptionError& e) {
    throw heteroauto::DescriptionError("plan " + path + ": " + e.what());
  }
  const nlohmann::json planned = heteroauto::to_json(plan.model), given = heteroauto::to_json(model);
  if (planned != given) {
    std::string differences;
    for (const auto& [field, value] : given.items()) {
      const nlohmann::json there = planned.value(field, nlohmann::json());
      if (there != value)
        differences += (differences.empty() ? "" : ", ") + field + " " + heteroauto::brief_json(there, 30) +
                       " there, " + heteroauto::brief_json(value, 30) + " here";
    }
    throw heteroauto::DescriptionError("plan " + path + " was made for another model than --model " + options.model +
                                       " (" + differences + ")");
  }
  if (plan.distributed_optimizer && options.no_distributed_optimizer)
    throw heteroauto::DescriptionError("plan " + path +
                                       " was made for the distributed optimizer (\"distributed_optimizer\": true), "
                                       "which --no-distributed-optimizer turns off; plan again with that flag");
  return plan;
}

// `plan` may turn the distributed optimizer on: its memory may only fit with it.
heteropp::TrainOptions train_options(const TrainCommandOptions& o, const heteroauto::Model& model,
                                     const heteroauto::Plan& plan) {
  heteropp::TrainOptions t;
  t.steps = o.steps;
  t.lr = o.lr;
  t.min_lr = o.min_lr;
  t.warmup_steps = o.warmup;
  t.weight_decay = o.weight_decay;
  t.clip_norm = o.clip;
  t.seed = o.seed;
  t.schedule = o.schedule == "gpipe" ? heteroauto::Schedule::gpipe : heteroauto::Schedule::one_f_one_b;
  t.loss_scaling.enabled = o.loss_scale == "dynamic" || (o.loss_scale == "auto" && model.dtype == "f16");
  t.loss_scaling.initial = o.initial_loss_scale;
  t.loss_scaling.growth_interval = o.loss_scale_window;
  t.data_files = o.data;
  t.out_dir = o.out;
  t.checkpoint_every = o.checkpoint_every;
  t.keep_checkpoints = o.keep_checkpoints;
  t.resume = o.resume;
  t.gradient_sync.overlap = o.overlap_grad_reduce == "on";
  t.gradient_sync.bucket_bytes = o.grad_bucket_bytes;
  t.gradient_sync.comm_dtype = *dtype_from_name(o.grad_comm_dtype);
  t.gradient_sync.shard_optimizer = o.distributed_optimizer || plan.distributed_optimizer;
  return t;
}

std::string percent(double fraction) {
  return format_fixed(fraction * 100, 0, "%");
}

std::string blocks(const heteropp::StageRole& role) {
  std::string text = role.end_block > role.first_block
                         ? std::to_string(role.first_block) + "-" + std::to_string(role.end_block - 1)
                         : "-";
  if (role.first()) text = "emb " + text;
  if (role.last()) text += " head";
  return text;
}

// "step   12/60  loss 3.4123  lr 2.91e-03  |g| 0.832  1.234 s  1659 tok/s  busy 62-91%  memory <= 26.02 MiB":
// the busy share of the least and the most busy rank, the most memory any device used.
void print_progress(const heteropp::StepReport& r) {
  double least = 1, most = 0, memory = 0;
  for (const heteropp::RankStepStats& s : r.ranks) {
    const double busy = 1 - s.bubble;
    least = std::min(least, busy);
    most = std::max(most, busy);
    memory = std::max(memory, s.memory_used);
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "step %4lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %s  %.0f tok/s  busy %.0f-%.0f%%  memory <= %s%s",
                static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss, r.lr, r.grad_norm,
                format_duration(r.seconds).c_str(), r.tokens_per_s, least * 100, most * 100,
                format_bytes(static_cast<uint64_t>(memory)).c_str(),
                r.skipped ? "  (skipped: overflow, loss scale halved)" : "");
  std::cout << line << std::endl;
}

// The run in numbers: per rank, the busy and bubble shares and the memory, averaged over the steps
// after the first (which pays for warm-up); the measured step time against HeteroAuto's prediction.
void print_summary(const heteroauto::Cluster& cluster, const heteroauto::Plan& plan,
                   const heteropp::TrainResult& result, const std::string& out_dir) {
  if (result.steps.empty()) return;
  const heteropp::Placement placement = heteropp::place(plan);
  const size_t skip = result.steps.size() > 1 ? 1 : 0;
  std::vector<double> times;
  for (size_t i = skip; i < result.steps.size(); ++i) times.push_back(result.steps[i].seconds);
  std::sort(times.begin(), times.end());
  const double measured = times[times.size() / 2];
  const double predicted = plan.prediction.step_time_s;
  const double error = predicted > 0 ? (predicted - measured) / measured : 0;
  const double tokens = static_cast<double>(plan.micro_batch_count()) * plan.micro_batch_size * plan.model.seq_len;

  Table table({"rank", "role", "device", "blocks", "micro-batches", "busy", "bubble", "grad sums", "exposed",
               "AdamW state", "peak allocated", "peak reserved", "memory used", "of"});
  nlohmann::json ranks = nlohmann::json::array();
  double most_gradient_comm = 0, most_exposed_comm = 0;  // per step, on the rank with the most
  for (size_t r = 0; r < placement.roles.size(); ++r) {
    const heteropp::StageRole& role = placement.roles[r];
    double busy = 0, bubble = 0, used = 0, total = 0, peak_allocated = 0, peak_reserved = 0, plugin_allocations = 0;
    double gradient_comm = 0, exposed_comm = 0, optimizer_state = 0;
    for (size_t i = skip; i < result.steps.size(); ++i) {
      const heteropp::RankStepStats& s = result.steps[i].ranks[r];
      busy += 1 - s.bubble;
      bubble += s.bubble;
      used = std::max(used, s.memory_used);
      total = s.memory_total;
      peak_allocated = std::max(peak_allocated, s.peak_allocated);
      peak_reserved = std::max(peak_reserved, s.peak_reserved);
      plugin_allocations += s.plugin_allocations;
      gradient_comm += s.gradient_comm_s;
      exposed_comm += s.exposed_comm_s;
      optimizer_state = s.optimizer_state;
    }
    const double n = static_cast<double>(result.steps.size() - skip);
    most_gradient_comm = std::max(most_gradient_comm, gradient_comm / n);
    most_exposed_comm = std::max(most_exposed_comm, exposed_comm / n);
    table.add_row(
        {std::to_string(r),
         "p" + std::to_string(role.pipeline) + " r" + std::to_string(role.replica) + " s" + std::to_string(role.stage) +
             (role.tp > 1 ? " t" + std::to_string(role.tp_rank) + "/" + std::to_string(role.tp) : ""),
         role.device_type, blocks(role), std::to_string(role.micro_batches), percent(busy / n), percent(bubble / n),
         format_duration(gradient_comm / n), format_duration(exposed_comm / n),
         format_bytes(static_cast<uint64_t>(optimizer_state)), format_bytes(static_cast<uint64_t>(peak_allocated)),
         format_bytes(static_cast<uint64_t>(peak_reserved)), format_bytes(static_cast<uint64_t>(used)),
         format_bytes(static_cast<uint64_t>(total))});
    ranks.push_back({{"rank", r},
                     {"pipeline", role.pipeline},
                     {"replica", role.replica},
                     {"stage", role.stage},
                     {"tp_rank", role.tp_rank},
                     {"tp", role.tp},
                     {"device_type", role.device_type},
                     {"first_block", role.first_block},
                     {"end_block", role.end_block},
                     {"micro_batches", role.micro_batches},
                     {"busy", busy / n},
                     {"bubble", bubble / n},
                     // Per step: the gradient sums' time and what of it the step waited for after
                     // its pipeline (the rest ran beside the backward pass).
                     {"gradient_comm_s", gradient_comm / n},
                     {"exposed_comm_s", exposed_comm / n},
                     {"optimizer_state_bytes", optimizer_state},
                     {"memory_used_bytes", used},
                     {"memory_total_bytes", total},
                     {"peak_allocated_bytes", peak_allocated},
                     {"peak_reserved_bytes", peak_reserved},
                     // Summed over the steps after the first: 0 when the cache served every tensor.
                     {"plugin_allocations_after_first_step", plugin_allocations}});
  }
  const heteropp::StepReport& first = result.steps.front();
  const heteropp::StepReport& last = result.steps.back();
  std::cout << "\nTrained steps " << first.step << "-" << last.step << ": loss " << format_fixed(first.loss, 4)
            << " -> " << format_fixed(last.loss, 4) << "\n";
  table.print(std::cout, 2);
  std::cout << "  step time   measured " << format_duration(measured) << " (median"
            << (skip ? " after the first step" : "") << "), HeteroAuto predicted " << format_duration(predicted) << " ("
            << (error >= 0 ? "+" : "") << format_fixed(error * 100, 1, "%") << ")\n"
            << "  throughput  " << format_rate(tokens / measured, "tokens/s") << "\n";
  if (most_gradient_comm > 0)
    std::cout << "  grad sums   " << format_duration(most_gradient_comm) << " per step, "
              << format_duration(most_exposed_comm) << " of it exposed after the pipeline (ranks with the most)\n";
  // A prediction far off because its costs are nominal, not this machine's: say what would fix it.
  std::string nominal;
  for (const auto& [type, basis] : plan.prediction.cost_basis)
    if (basis.find("measured") == std::string::npos) nominal += (nominal.empty() ? "" : ", ") + type;
  if (std::abs(error) > 0.1 && !nominal.empty())
    std::cout << "  (the prediction used peak x efficiency for " << nominal
              << ", not measured times: h2 train --profile, or h2 profile before h2 plan, measures them)\n";
  // How far the measured costs themselves lay apart: a prediction from them means no more than that.
  nlohmann::json spreads = nlohmann::json::object();
  std::string spread_line;
  for (const auto& [type, basis] : plan.prediction.cost_basis) {
    const auto& measured = cluster.device_type(type).measured;
    const auto profile = measured.find(plan.model.name);
    if (profile == measured.end() || profile->second.repeats == 0) continue;
    spreads[type] = {{"spread", profile->second.spread}, {"uncertainty", profile->second.uncertainty}};
    spread_line += (spread_line.empty() ? "" : ", ") + type + " +-" +
                   format_fixed(profile->second.uncertainty * 100, 1, "%") + " (repeats spread by " +
                   format_fixed(profile->second.spread * 100, 1, "%") + ")";
  }
  if (!spread_line.empty())
    std::cout << "  profile     layer times uncertain by " << spread_line
              << " (a prediction from them means no more)\n";
  if (out_dir.empty()) return;
  std::cout << "  wrote       " << out_dir << "/metrics.jsonl, " << out_dir << "/trace.json (Perfetto), "
            << (result.checkpoint.empty() ? std::string("no checkpoint") : result.checkpoint) << "\n";
  const nlohmann::json summary = {{"first_step", first.step},
                                  {"last_step", last.step},
                                  {"first_loss", first.loss},
                                  {"last_loss", last.loss},
                                  {"measured_step_s", measured},
                                  {"predicted_step_s", predicted},
                                  {"prediction_error", error},
                                  // Per measured device type: its profile's spread over the repeats and
                                  // its times' uncertainty (model_profiler.hpp).
                                  {"profile_spread", spreads},
                                  {"cost_basis", plan.prediction.cost_basis},
                                  {"tokens_per_s", tokens / measured},
                                  {"gradient_comm_s", most_gradient_comm},
                                  {"exposed_comm_s", most_exposed_comm},
                                  {"checkpoint", result.checkpoint},
                                  {"ranks", ranks}};
  write_file_atomically((fs::path(out_dir) / "summary.json").string(), summary.dump(2) + "\n");
}

// One rank: bootstrap, device, communicator, training.
int run_worker(const TrainCommandOptions& options) {
  if (options.profile)
    throw UsageError(
        "--profile is for the whole job, not one rank of it (--worker): a worker runs "
        "the --plan it is given");
  const heteroauto::Cluster cluster = heteroauto::load_cluster(options.cluster);
  const heteroauto::Model model = heteroauto::load_model(options.model);
  if (options.plan.empty()) throw UsageError("--worker needs --plan (the plan every rank executes)");
  const heteroauto::Plan plan = read_plan(options.plan, cluster, options, model);
  const dicomm::RankInfo info = dicomm::rank_info_from_environment();
  const heteropp::Placement placement = heteropp::place(plan);
  if (info.rank >= placement.world_size())
    throw UsageError("rank " + std::to_string(info.rank) + " is not in the plan, which has " +
                     std::to_string(placement.world_size()) + " ranks");
  // H2_DEVICE when the launcher set it (h2 train's does); else, started by another launcher, the
  // plugin of the plan's device type and the device's index in its node, chosen here.
  std::optional<std::string> planned;
  if (dicomm::device_from_environment().empty()) {
    const heteropp::StageRole& role = placement.roles[static_cast<size_t>(info.rank)];
    const std::string& plugin = cluster.device_type(role.device_type).plugin;
    if (plugin.empty())
      throw heteroauto::DescriptionError("device type '" + role.device_type + "' has no \"plugin\" in " +
                                         options.cluster);
    planned = plugin + ":" + std::to_string(role.device.device);
  }
  RuntimeOptions runtime_options =
      planned ? dicomm::runtime_options_for_device(*planned) : dicomm::runtime_options_for_device();
  runtime_options.plugin_options = plugin_options_of(options);
  Runtime runtime{runtime_options};
  const Device device = planned ? dicomm::select_device(runtime, info, *planned) : dicomm::select_device(runtime, info);
  dicomm::Communicator world = dicomm::Communicator::world();
  try {
    const heteropp::TrainResult result =
        heteropp::train(plan, train_options(options, model, plan), world, device, [&](const heteropp::StepReport& r) {
          if (world.rank() == 0) print_progress(r);
        });
    if (world.rank() == 0) print_summary(cluster, plan, result, options.out);
    return 0;
  } catch (const std::exception& e) {
    world.abort_after(e);
    throw;
  }
}

// Where the description lets the plan count on device-direct transfers that DiComm would stage
// here, the prediction is optimistic: said before the ranks start, with the field to change.
void warn_where_transfers_are_staged(const heteroauto::Cluster& cluster, const PluginOptionsByName& plugin_options) {
  if (!claims_device_direct(cluster)) return;  // nothing to hold against the plugins; none loaded
  RuntimeOptions options;                      // the description's plugins only, with the user's options
  for (const heteroauto::DeviceType& type : cluster.device_types)
    if (!type.plugin.empty() &&
        std::find(options.plugins.begin(), options.plugins.end(), type.plugin) == options.plugins.end())
      options.plugins.push_back(type.plugin);
  if (options.plugins.empty()) return;
  options.plugin_options = plugin_options;
  const Runtime runtime{options};
  for (const std::string& disagreement : device_direct_disagreements(cluster, runtime))
    std::cerr << "h2 train: warning: " << disagreement
              << "; the plan counted on device-direct transfers, so its predicted step time is optimistic\n";
}

// The whole job on this machine: plan, simulate the cluster's devices, start one rank per device.
int run_driver(const TrainCommandOptions& options) {
  if (options.profile && !options.plan.empty())
    throw UsageError("--profile measures the devices to plan on, and --plan gives the plan: use one of them");
  const PluginOptionsByName user_plugin_options = plugin_options_of(options);
  if (!options.resume.empty()) {  // before any device is measured or rank started
    const std::string checkpoint = heteropp::find_checkpoint(options.resume);
    const int64_t done = heteropp::read_manifest(checkpoint).step;
    if (done >= options.steps)
      throw UsageError("--resume " + checkpoint + " is at step " + std::to_string(done) + " and --steps is " +
                       std::to_string(options.steps) + ": nothing to train (--steps counts from the start of the run)");
  }
  // With --profile the job's cluster description is the given one with this model's measured costs,
  // so that HeteroAuto's plan and its predicted step time fit the devices as they run here, not their
  // nominal peak x efficiency.
  std::string cluster_path = options.cluster;
  if (options.profile) {
    fs::create_directories(options.out);
    cluster_path = (fs::path(options.out) / "cluster-profiled.json").string();
    // More iterations than h2 profile's default: 20 repeats of every part at every size sample the
    // machine for long enough (about 30 s for the README's job) that its drifting speed averages out.
    const int code = run_profile({.cluster = options.cluster,
                                  .model = options.model,
                                  .iterations = 20,
                                  .warmup = 5,
                                  .output = cluster_path,
                                  .plugin_options = options.plugin_options});
    if (code != 0) return code;
    std::cout << "\n";
  }
  const heteroauto::Cluster cluster = heteroauto::load_cluster(cluster_path);
  const heteroauto::Model model = heteroauto::load_model(options.model);
  heteroauto::Plan plan;
  if (!options.plan.empty()) {
    plan = read_plan(options.plan, cluster, options, model);
    std::cout << "Plan from " << options.plan << ": " << plan_summary(plan) << "\n";
  } else {
    const heteroauto::SearchResult found =
        heteroauto::search_plans(cluster, model,
                                 {.top = 1,
                                  .max_tp = options.max_tp,
                                  .gradients = gradient_settings(options.distributed_optimizer, options.grad_comm_dtype,
                                                                 options.overlap_grad_reduce),
                                  .choose_distributed_optimizer = !options.no_distributed_optimizer});
    if (found.plans.empty()) throw heteroauto::DescriptionError("nothing fits: " + found.infeasible);
    plan = found.plans.front();
    heteroauto::check_plan_invariants(plan, cluster);
    std::cout << "HeteroAuto's plan for " << model.name << " on " << cluster.name << ": " << plan_summary(plan) << "\n";
  }
  print_plan(plan, std::cout);
  warn_where_transfers_are_staged(cluster, user_plugin_options);
  const heteropp::LocalDevices devices = heteropp::local_devices(plan, cluster);

  fs::create_directories(options.out);
  const std::string plan_path = (fs::path(options.out) / "plan.json").string();
  write_file_atomically(plan_path, heteroauto::to_json(plan).dump(2) + "\n");

  // Ranks compute with the threads their profile measured them with (the description's shared_host,
  // which h2 profile writes; after --profile, the cores shared over every device of the cluster), so
  // that the plan's prediction holds. Without one, the machine's cores are shared over the ranks.
  const int ranks = static_cast<int>(devices.per_rank.size());
  const std::optional<double> profiled_threads =
      cluster.shared_host ? std::optional<double>(cluster.shared_host->threads_per_device) : std::nullopt;
  const PluginOptionsByName plugin_options = merge_plugin_options(
      simulated_device_options(devices, options.profile ? devices.devices.size() : devices.per_rank.size(),
                               profiled_threads),
      user_plugin_options);

  LaunchOptions launch;
  launch.ranks = ranks;
  for (const std::string& d : devices.per_rank) launch.devices += (launch.devices.empty() ? "" : ",") + d;
  launch.no_prefix = true;
  // Every rank reads the job from one file: its settings, the files, the plugin options.
  TrainCommandOptions job = options;
  job.cluster = cluster_path;
  job.plan = plan_path;
  if (plan.distributed_optimizer && !options.distributed_optimizer) {
    std::cout << "The plan was made for the distributed optimizer: training with it.\n";
    job.distributed_optimizer = true;
  }
  const std::string job_path = (fs::path(options.out) / "job.json").string();
  write_file_atomically(job_path, train_job_json(job, plugin_options).dump(2) + "\n");
  launch.command = {self_executable(), "train", "--job", job_path};
  std::cout << "\nStarting " << ranks << (ranks == 1 ? " rank" : " ranks") << " (" << launch.devices << "), "
            << options.steps << " steps, output in " << options.out << "/" << std::endl;
  return run_launch(launch);
}

}  // namespace

void add_train_command(CLI::App& app, TrainCommandOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand(
      "train", "Train a GPT model on a heterogeneous cluster: plan (HeteroAuto), launch, run the pipeline (HeteroPP)");
  command->footer("Example: h2 train --cluster examples/clusters/local.json --model examples/models/gpt-tiny.json");
  // Required unless --job gives them (checked in the callback).
  command->add_option("--cluster", options.cluster, "Cluster description (JSON); required")->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "Model description (JSON); required")->check(CLI::ExistingFile);
  command->add_option("--plan", options.plan, "Plan file (h2 plan --output); default: plan now with HeteroAuto")
      ->check(CLI::ExistingFile);
  command->add_flag("--profile", options.profile,
                    "Measure the model on every device first (as h2 profile does, a few seconds) and plan on the "
                    "measured costs; writes DIR/cluster-profiled.json. Not with --plan");
  command->add_option("--steps", options.steps, "Train until this many steps are done")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  command->add_option("--out", options.out, "Directory for plan.json, metrics.jsonl, trace.json, checkpoints/")
      ->capture_default_str();
  command->add_option("--resume", options.resume, "Continue from a checkpoint (DIR/checkpoints or one step directory)")
      ->check(CLI::ExistingDirectory);
  command->add_option("--lr", options.lr, "Peak learning rate")->capture_default_str()->check(finite_range(1e-9, 10.0));
  command->add_option("--min-lr", options.min_lr, "Learning rate at the last step (cosine decay)")
      ->capture_default_str()
      ->check(finite_range(0.0, 10.0));
  command->add_option("--warmup", options.warmup, "Linear warm-up steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  command->add_option("--weight-decay", options.weight_decay, "AdamW weight decay (matrices only)")
      ->capture_default_str()
      ->check(finite_range(0.0, 10.0));
  command->add_option("--clip", options.clip, "Global gradient-norm clip (0: none)")
      ->capture_default_str()
      ->check(finite_range(0.0, 1e9));
  command->add_option("--seed", options.seed, "Seed of the weights and the data order")->capture_default_str();
  command->add_option("--schedule", options.schedule, "Pipeline schedule")
      ->capture_default_str()
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
  command
      ->add_option("--max-tp", options.max_tp,
                   "Largest tensor-parallel degree HeteroAuto may plan (a --plan may hold any); 0, the default: any "
                   "degree the model and the node groups allow, as h2 plan")
      ->check(CLI::Range(0, 64));
  command->add_option("--loss-scale", options.loss_scale, "Dynamic loss scaling (auto: for f16 models)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "dynamic", "none"}));
  command
      ->add_option("--initial-loss-scale", options.initial_loss_scale, "The first loss scale of dynamic loss scaling")
      ->capture_default_str()
      ->check(finite_range(1.0, 1e30));
  command
      ->add_option("--loss-scale-window", options.loss_scale_window,
                   "Steps without overflow before the loss scale doubles")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  command->add_option("--data", options.data, "Training text files (default: /usr/share/common-licenses/*)")
      ->check(CLI::ExistingFile);
  command->add_option("--checkpoint-every", options.checkpoint_every, "Steps between checkpoints (0: at the end only)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  command->add_option("--keep-checkpoints", options.keep_checkpoints, "Newest checkpoints kept")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  command
      ->add_option("--overlap-grad-reduce", options.overlap_grad_reduce,
                   "Sum each bucket of gradients over the replicas as soon as the last backward pass has made it, "
                   "while the pass goes on (off: all after the pipeline)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  command
      ->add_option("--grad-bucket", options.grad_bucket_bytes,
                   "Bytes of f32 gradients per bucket (whole layers, at least one): 4096, 16M, 16MiB")
      ->default_str("1MiB")
      ->transform(byte_size_range(1, uint64_t{1} << 40));
  command
      ->add_option("--grad-comm-dtype", options.grad_comm_dtype,
                   "What gradients travel in between replicas; f16 and bf16 halve the bytes and sum in f32")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  add_distributed_optimizer_flags(
      *command, options.distributed_optimizer, options.no_distributed_optimizer,
      "Shard AdamW's moments and the update of the f32 master weights over the replicas that hold each layer "
      "(ZeRO-1): the gradients are reduce-scattered, each rank updates its share, the masters are gathered back");
  add_plugin_option_flag(command, options.plugin_options);
  command->add_flag("--worker", options.worker,
                    "Run as one rank of a job started by another launcher (srun, mpirun, h2 launch); needs --plan");
  command
      ->add_option("--job", options.job,
                   "Run as one rank of the job FILE describes (DIR/job.json, written by h2 train before it starts "
                   "the ranks); every setting comes from the file, so give no other option")
      ->check(CLI::ExistingFile);
  command->callback([command, &options, &exit_code] {
    if (options.job.empty())
      for (const char* name : {"--cluster", "--model"})
        if (command->get_option(name)->count() == 0) {
          std::cerr << kName << ": " << name << " is required (or --job FILE)\n";
          exit_code = 2;
          return;
        }
    if (!options.job.empty())
      for (const CLI::Option* option : command->get_options())
        if (option->count() > 0 && option->get_name() != "--job") {
          std::cerr << kName << ": --job takes every setting from " << options.job << "; " << option->get_name()
                    << " cannot be given with it\n";
          exit_code = 2;
          return;
        }
    exit_code = run_train(options);
  });
}

int run_train(const TrainCommandOptions& options) {
  try {
    if (!options.job.empty()) return run_worker(read_train_job(options.job));
    return options.worker ? run_worker(options) : run_driver(options);
  } catch (const UsageError& e) {
    std::cerr << kName << ": " << e.what() << "\n";
    return 2;
  } catch (const heteroauto::DescriptionError& e) {
    std::cerr << kName << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    const char* rank = std::getenv("H2_RANK");
    std::cerr << kName << (options.worker && rank ? std::string(" rank ") + rank : std::string()) << ": " << e.what()
              << "\n";
    return 1;
  }
}

}  // namespace h2::tools
