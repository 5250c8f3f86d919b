#include "profile_command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "format.hpp"
#include "h2/dicomm/bootstrap.hpp"
#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/model_profiler.hpp"
#include "launch_command.hpp"
#include "local_cluster.hpp"
#include "plugin_option_args.hpp"
#include "table.hpp"

namespace h2::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "h2 profile";
// Median layer times less certain than this make a prediction from them mean little: say so.
constexpr double kUncertaintyWarning = 0.05;

std::vector<int> micro_batches_of(const ProfileOptions& options, const heteroauto::Model& model) {
  if (options.micro_batch > 0) return {options.micro_batch};
  std::vector<int> sizes = model.micro_batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

// One device of the cluster: the model profiler (heteropp/model_profiler.hpp) on its device, in turns
// of `devices_at_once` ranks (a barrier before each turn).
int run_worker(const ProfileOptions& options) {
  const heteroauto::Model model = heteroauto::load_model(options.model);
  RuntimeOptions runtime_options = dicomm::runtime_options_for_device();
  runtime_options.plugin_options = parse_plugin_options(options.plugin_options);
  Runtime runtime{runtime_options};
  const Device device = dicomm::select_device(runtime, dicomm::rank_info_from_environment());
  Stream stream = device.create_stream();
  dicomm::Communicator world = dicomm::Communicator::world();
  const int at_once = options.devices_at_once > 0 ? options.devices_at_once : world.size();
  const nlohmann::json result = heteropp::profile_device(
      model, device, stream,
      {.micro_batches = micro_batches_of(options, model), .warmup = options.warmup, .iterations = options.iterations},
      {.turns = (world.size() + at_once - 1) / at_once, .turn = world.rank() / at_once, .barrier = [&world] {
         world.barrier();
       }});
  const char* rank = std::getenv("H2_RANK");
  std::ofstream out(fs::path(options.worker_results) / ("rank-" + std::string(rank ? rank : "0")));
  out << result.dump() << "\n";
  return out ? 0 : 1;
}

std::string ms_cell(const nlohmann::json& point) {
  return format_fixed(point["forward_ms"].get<double>(), 2, "") + " / " +
         format_fixed(point["backward_ms"].get<double>(), 2, " ms");
}

int run_driver(const ProfileOptions& options) {
  const heteroauto::Cluster cluster = heteroauto::load_cluster(options.cluster);
  const heteroauto::Model model = heteroauto::load_model(options.model);
  const heteropp::LocalDevices devices = heteropp::local_devices(cluster);
  if (devices.devices.empty())
    throw heteroauto::DescriptionError(options.cluster +
                                       ": no device type names a \"plugin\", so nothing can be profiled");
  const int ranks = static_cast<int>(devices.devices.size());
  const PluginOptionsByName plugin_options = merge_plugin_options(
      simulated_device_options(devices, devices.devices.size()), parse_plugin_options(options.plugin_options));
  const std::vector<int> sizes = micro_batches_of(options, model);
  const std::optional<heteroauto::SharedHost> host = simulated_host(cluster, plugin_options);
  // A coreful of devices at a time, each at full speed (the planner charges the sharing); every device
  // at once where none share this machine's cores.
  const int at_once =
      host ? std::max(1, static_cast<int>(host->cores / host->threads_per_device)) : static_cast<int>(ranks);

  const fs::path results = fs::temp_directory_path() / ("h2-profile-" + std::to_string(::getpid()));
  fs::create_directories(results);
  LaunchOptions launch;
  launch.ranks = ranks;
  for (const heteropp::LocalDevice& d : devices.devices)
    launch.devices += (launch.devices.empty() ? "" : ",") + d.label;
  launch.command = {self_executable(),   "profile",
                    "--cluster",         options.cluster,
                    "--model",           options.model,
                    "--iterations",      std::to_string(options.iterations),
                    "--warmup",          std::to_string(options.warmup),
                    "--worker-results",  results.string(),
                    "--devices-at-once", std::to_string(at_once)};
  if (options.micro_batch > 0) {
    launch.command.push_back("--micro-batch");
    launch.command.push_back(std::to_string(options.micro_batch));
  }
  for (const std::string& arg : plugin_option_args(plugin_options)) launch.command.push_back(arg);
  std::string size_list;
  for (int b : sizes) size_list += (size_list.empty() ? "" : ", ") + std::to_string(b);
  std::cout << "Profiling " << model.name << " (a layer, the embedding, the head and the optimizer; micro-batch "
            << size_list << ") on " << ranks << (ranks == 1 ? " device" : " devices");
  if (at_once < ranks)
    std::cout << ", " << at_once << " at a time (they share this machine's " << format_fixed(host->cores, 0, "")
              << " cores, " << format_fixed(host->threads_per_device, 0, "") << " per device)";
  std::cout << " ..." << std::endl;
  const int code = run_launch(launch);
  if (code != 0) {
    fs::remove_all(results);
    return code;
  }
  std::map<std::string, std::vector<nlohmann::json>> by_type;
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(results / ("rank-" + std::to_string(r)));
    by_type[devices.devices[static_cast<size_t>(r)].device_type].push_back(nlohmann::json::parse(in));
  }
  fs::remove_all(results);

  nlohmann::json described = heteroauto::read_json_file(options.cluster, "cluster");
  if (host)
    described["shared_host"] = {
        {"cores", host->cores}, {"threads_per_device", host->threads_per_device}, {"node_groups", host->node_groups}};
  else
    described.erase("shared_host");
  const heteroauto::CostModel cost(cluster, model);
  Table table({"device type", "devices", "micro-batch", "layer fwd / bwd", "embedding fwd / bwd", "head fwd / bwd",
               "peak x efficiency layer fwd", "spread", "time +-"});
  nlohmann::json measured = nlohmann::json::object();
  std::string optimizer_line, warnings;
  for (nlohmann::json& type : described.at("device_types")) {
    const std::string name = type.at("name");
    if (!by_type.count(name)) continue;
    const nlohmann::json profile = heteropp::mean_profile(by_type[name]);
    type["measured"][model.name] = profile;
    measured[name] = profile;
    // What the description's peak and efficiency said, for comparison.
    const heteroauto::DeviceType& device_type = cluster.device_type(name);
    const auto peak = device_type.peak_tflops.find(model.dtype);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::string predicted =
          peak == device_type.peak_tflops.end()
              ? "-"
              : format_fixed(cost.layer_forward_flops(sizes[i]) / (peak->second * 1e12 * device_type.efficiency) * 1e3,
                             2, " ms");
      table.add_row({i == 0 ? name : "", i == 0 ? std::to_string(by_type[name].size()) : "", std::to_string(sizes[i]),
                     ms_cell(profile["layer"][i]), ms_cell(profile["embedding"][i]), ms_cell(profile["head"][i]),
                     predicted, i == 0 ? format_fixed(profile["spread"].get<double>() * 100, 1, "%") : "",
                     i == 0 ? format_fixed(profile["uncertainty"].get<double>() * 100, 1, "%") : ""});
    }
    if (const double uncertainty = profile["uncertainty"].get<double>(); uncertainty > kUncertaintyWarning)
      warnings += "warning: " + name + "'s layer time is uncertain by +-" + format_fixed(uncertainty * 100, 1, "%") +
                  " (its " + std::to_string(options.iterations) + " interleaved repeats spread by " +
                  format_fixed(profile["spread"].get<double>() * 100, 1, "%") +
                  ", or its devices disagree): a prediction made from it means no more. Measure on an otherwise "
                  "idle machine, or with more --iterations.\n";
    optimizer_line += (optimizer_line.empty() ? "" : ", ") + name + " " +
                      format_fixed(profile["optimizer_ns_per_parameter"].get<double>(), 2, " ns") +
                      " (norm and AdamW " + format_fixed(profile["update_ns_per_parameter"].get<double>(), 2, " ns") +
                      ")";
  }
  if (options.json) {
    std::cout << nlohmann::json({{"model", model.name}, {"measured", measured}}).dump(2) << "\n";
  } else {
    table.print(std::cout, 0);
    std::cout << "optimizer per parameter per step (zero, norm, AdamW): " << optimizer_line << "\n";
  }
  std::cerr << warnings;
  if (!options.output.empty()) {
    write_file_atomically(options.output, described.dump(2) + "\n");
    if (!options.json)
      std::cout << "Wrote " << options.output << " with the measured profile of " << model.name
                << " for h2 plan and h2 train\n";
  }
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, ProfileOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand(
      "profile",
      "Measure a model's layer, embedding, head and optimizer time on every device of a cluster at once, for the "
      "planner's cost model");
  command->footer(
      "Example: h2 profile --cluster examples/clusters/local.json --model examples/models/gpt-tiny.json -o "
      "local-profiled.json");
  command->add_option("--cluster", options.cluster, "Cluster description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "Model description (JSON)")->required()->check(CLI::ExistingFile);
  command
      ->add_option("--micro-batch", options.micro_batch,
                   "Measure only this micro-batch size (default: every size the model allows)")
      ->check(CLI::Range(1, 1 << 20));
  command
      ->add_option("--iterations", options.iterations,
                   "Timed repeats, the parts and sizes taking turns (their trimmed mean is kept, the spread reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  command->add_option("--warmup", options.warmup, "Untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  command->add_option("-o,--output", options.output, "Write the cluster description with the measured profile here");
  command->add_flag("--json", options.json, "Print JSON for programs instead of a table");
  add_plugin_option_flag(command, options.plugin_options);
  command->add_option("--worker-results", options.worker_results)->group("");  // internal: one device's run
  command->add_option("--devices-at-once", options.devices_at_once)->group("")->check(CLI::Range(1, 1 << 20));
  command->callback([&options, &exit_code] { exit_code = run_profile(options); });
}

int run_profile(const ProfileOptions& options) {
  try {
    return options.worker_results.empty() ? run_driver(options) : run_worker(options);
  } catch (const std::exception& e) {
    std::cerr << kName << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace h2::tools
