// `h2 train`: plans with HeteroAuto when no plan is given, starts one rank per device of the plan on
// this machine (each on its plugin, a simulated cluster when the devices are cpu-reference), trains
// the model with HeteroPP, shows progress, and writes metrics, a timeline and checkpoints.
// `h2 train --worker` is one rank of that job, for launchers that start the ranks themselves
// (srun, mpirun, h2 launch): it reads its rank from the environment and needs --plan. The ranks
// h2 train starts itself run `h2 train --job DIR/job.json` (train_job.hpp).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct TrainCommandOptions {
  std::string cluster, model, plan;
  bool profile = false;  // measure the model on every device first (h2 profile) and plan on that
  int64_t steps = 60;
  std::string out = "h2-train";
  std::string resume;
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, clip = 1.0;
  int64_t warmup = 10;
  uint64_t seed = 1234;
  std::string schedule = "1f1b";
  int max_tp = 0;                   // HeteroAuto's largest tensor-parallel degree when h2 train plans; 0: any
  std::string loss_scale = "auto";  // auto: dynamic for f16 models, none otherwise
  double initial_loss_scale = 65536;
  int64_t loss_scale_window = 2000;  // steps without overflow before the scale doubles
  std::vector<std::string> data;
  int64_t checkpoint_every = 0;
  int keep_checkpoints = 2;
  std::string overlap_grad_reduce = "on";  // sum gradients while the last backward pass runs
  uint64_t grad_bucket_bytes = uint64_t{1} << 20;
  std::string grad_comm_dtype = "f32";
  bool distributed_optimizer = false;     // ZeRO-1: AdamW state sharded over each layer's replicas
  bool no_distributed_optimizer = false;  // never; by default HeteroAuto's plan says which
  bool worker = false;
  std::string job;                          // --job FILE: one rank of the job h2 train's driver wrote there (job.json)
  std::vector<std::string> plugin_options;  // --plugin-option PLUGIN:KEY=VALUE, passed on to every rank
};

void add_train_command(CLI::App& app, TrainCommandOptions& options, int& exit_code);
int run_train(const TrainCommandOptions& options);

}  // namespace h2::tools
