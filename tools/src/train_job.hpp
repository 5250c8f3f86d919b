// DIR/job.json: what every rank of `h2 train`'s job runs with. The driver writes it before it starts
// the ranks, and each rank reads it (`h2 train --job DIR/job.json`) instead of getting every setting
// on its command line again. A rank's place in the job (rank, local rank, rendezvous, device) stays
// in its environment, which the launcher sets. A program can read the file to see how a run was made.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plugin_option_args.hpp"
#include "train_command.hpp"

namespace h2::tools {

// The job `options` describe (their cluster, model and plan paths as given), with `plugin_options`
// for every rank.
nlohmann::json train_job_json(const TrainCommandOptions& options, const PluginOptionsByName& plugin_options);

// The options a rank of the job in `path` runs with (`worker` set). Throws
// heteroauto::DescriptionError naming the file and the field when it is not such a job.
TrainCommandOptions read_train_job(const std::string& path);

}  // namespace h2::tools
