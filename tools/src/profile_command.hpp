// `h2 profile`: measures a model on every device of a cluster at once (one process per device, as in
// training, so devices that share a machine also share its cores as they will then): one transformer
// layer's, the embedding's and the head's (final norm, LM head, loss) forward and backward time at
// each micro-batch size, and the optimizer's time per parameter. It writes the cluster description
// back with each device type's `measured` profile for the model, which HeteroAuto's cost model then
// uses instead of peak x efficiency.
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
  std::vector<std::string> plugin_options;  // --plugin-option PLUGIN:KEY=VALUE, passed on to every rank
};

void add_profile_command(CLI::App& app, ProfileOptions& options, int& exit_code);
int run_profile(const ProfileOptions& options);

}  // namespace h2::tools
