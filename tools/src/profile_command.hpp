// `h2 profile`: measures a model on every device of a cluster (one process per device, as in
// training): one transformer layer's, the embedding's and the head's (final norm, LM head, loss)
// forward and backward time at each micro-batch size, and the optimizer's time per parameter. It
// writes the cluster description back with each device type's `measured` profile for the model, which
// HeteroAuto's cost model then uses instead of peak x efficiency. Devices simulated on this machine
// (cpu-reference) share its cores: they are measured a coreful at a time, each at full speed, and the
// description gains a `shared_host` section naming them, with which the planner charges the sharing
// when more of them are busy than there are cores.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct ProfileOptions {
  std::string cluster, model;
  int micro_batch = 0;  // 0: every micro-batch size the model allows
  int iterations = 5;
  int warmup = 2;
  std::string output;  // the cluster description with the measured profiles; "": print only
  bool json = false;
  std::string worker_results;               // internal: a device's rank writes its measurement into this directory
  int devices_at_once = 0;                  // internal: how many devices measure at a time (0: all)
  std::vector<std::string> plugin_options;  // --plugin-option PLUGIN:KEY=VALUE, passed on to every rank
};

void add_profile_command(CLI::App& app, ProfileOptions& options, int& exit_code);
int run_profile(const ProfileOptions& options);

}  // namespace h2::tools
