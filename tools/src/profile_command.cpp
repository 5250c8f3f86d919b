#include "profile_command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "format.hpp"
#include "h2/dicomm/bootstrap.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/gpt.hpp"
#include "launch_command.hpp"
#include "local_cluster.hpp"
#include "table.hpp"

namespace h2::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "h2 profile";

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int micro_batch_of(const ProfileOptions& options, const heteroauto::Model& model) {
  if (options.micro_batch > 0) return options.micro_batch;
  return *std::min_element(model.micro_batch_sizes.begin(), model.micro_batch_sizes.end());
}

// One device: a stage of one block, forward and backward on random activations, timed to completion.
int run_worker(const ProfileOptions& options) {
  const heteroauto::Model model = heteroauto::load_model(options.model);
  const int64_t batch = micro_batch_of(options, model);
  Runtime runtime{dicomm::runtime_options_for_device()};
  const Device device = dicomm::select_device(runtime, dicomm::rank_info_from_environment());
  Stream stream = device.create_stream();
  heteropp::GptStage layer(heteropp::GptConfig::from_model(model, 1), 0, 1, false, false, device, stream);
  const Tensor x = Tensor::empty(device, {batch, model.seq_len, model.hidden}, DType::f32);
  const Tensor dy = Tensor::empty(device, {batch, model.seq_len, model.hidden}, DType::f32);
  ops::normal(stream, x, 0, 1, ops::Philox{1, 0});
  ops::normal(stream, dy, 0, 1e-3, ops::Philox{2, 0});
  std::vector<double> forward_ms, backward_ms;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    layer.forward(i, x);
    stream.synchronize();
    const Clock::time_point middle = Clock::now();
    layer.backward(i, dy);
    stream.synchronize();
    const Clock::time_point end = Clock::now();
    if (i < options.warmup) continue;
    forward_ms.push_back(std::chrono::duration<double, std::milli>(middle - start).count());
    backward_ms.push_back(std::chrono::duration<double, std::milli>(end - middle).count());
  }
  const nlohmann::json result = {
      {"device", device.label()}, {"forward_ms", median(forward_ms)}, {"backward_ms", median(backward_ms)}};
  const char* rank = std::getenv("H2_RANK");
  std::ofstream out(fs::path(options.worker_results) / ("rank-" + std::string(rank ? rank : "0")));
  out << result.dump() << "\n";
  return out ? 0 : 1;
}

int run_driver(const ProfileOptions& options) {
  const heteroauto::Cluster cluster = heteroauto::load_cluster(options.cluster);
  const heteroauto::Model model = heteroauto::load_model(options.model);
  const int batch = micro_batch_of(options, model);
  const heteropp::LocalDevices devices = heteropp::local_devices(cluster);
  if (devices.devices.empty())
    throw heteroauto::DescriptionError(options.cluster +
                                       ": no device type names a \"plugin\", so nothing can be profiled");
  const int ranks = static_cast<int>(devices.devices.size());
  export_simulated_devices(devices, ranks);

  const fs::path results = fs::temp_directory_path() / ("h2-profile-" + std::to_string(::getpid()));
  fs::create_directories(results);
  LaunchOptions launch;
  launch.ranks = ranks;
  for (const heteropp::LocalDevice& d : devices.devices)
    launch.devices += (launch.devices.empty() ? "" : ",") + d.label;
  launch.command = {self_executable(),  "profile",
                    "--cluster",        options.cluster,
                    "--model",          options.model,
                    "--micro-batch",    std::to_string(batch),
                    "--iterations",     std::to_string(options.iterations),
                    "--warmup",         std::to_string(options.warmup),
                    "--worker-results", results.string()};
  std::cout << "Profiling " << model.name << " (one layer, micro-batch " << batch << ") on " << ranks
            << (ranks == 1 ? " device" : " devices") << " at once ..." << std::endl;
  const int code = run_launch(launch);
  if (code != 0) {
    fs::remove_all(results);
    return code;
  }

  // Per device type: the mean of its devices' medians.
  std::map<std::string, std::pair<double, double>> sums;
  std::map<std::string, int> counts;
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(results / ("rank-" + std::to_string(r)));
    const nlohmann::json j = nlohmann::json::parse(in);
    auto& [forward, backward] = sums[devices.devices[static_cast<size_t>(r)].device_type];
    forward += j.at("forward_ms").get<double>();
    backward += j.at("backward_ms").get<double>();
    ++counts[devices.devices[static_cast<size_t>(r)].device_type];
  }
  fs::remove_all(results);

  nlohmann::json described = heteroauto::read_json_file(options.cluster, "cluster");
  const heteroauto::CostModel cost(cluster, model);
  Table table({"device type", "devices", "micro-batch", "forward", "backward", "peak x efficiency predicted forward"});
  nlohmann::json measured = nlohmann::json::object();
  for (nlohmann::json& type : described.at("device_types")) {
    const std::string name = type.at("name");
    if (!counts.count(name)) continue;
    const double forward = sums[name].first / counts[name], backward = sums[name].second / counts[name];
    type["measured_layer_time"] = {{"micro_batch", batch}, {"forward_ms", forward}, {"backward_ms", backward}};
    measured[name] = type["measured_layer_time"];
    // What the description's peak and efficiency said, for comparison.
    const heteroauto::DeviceType& device_type = cluster.device_type(name);
    const auto peak = device_type.peak_tflops.find(model.dtype);
    const std::string predicted =
        peak == device_type.peak_tflops.end()
            ? "-"
            : format_fixed(cost.layer_forward_flops(batch) / (peak->second * 1e12 * device_type.efficiency) * 1e3, 2,
                           " ms");
    table.add_row({name, std::to_string(counts[name]), std::to_string(batch), format_fixed(forward, 2, " ms"),
                   format_fixed(backward, 2, " ms"), predicted});
  }
  if (options.json) {
    std::cout << nlohmann::json({{"model", model.name}, {"measured_layer_time", measured}}).dump(2) << "\n";
  } else {
    table.print(std::cout, 0);
  }
  if (!options.output.empty()) {
    const std::string temporary = options.output + ".tmp";
    std::ofstream(temporary) << described.dump(2) << "\n";
    fs::rename(temporary, options.output);
    if (!options.json)
      std::cout << "Wrote " << options.output << " with measured_layer_time for h2 plan and h2 train\n";
  }
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, ProfileOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand(
      "profile", "Measure a model's layer time on every device of a cluster at once, for the planner's cost model");
  command->footer(
      "Example: h2 profile --cluster examples/clusters/local.json --model examples/models/gpt-tiny.json -o "
      "local-profiled.json");
  command->add_option("--cluster", options.cluster, "Cluster description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "Model description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--micro-batch", options.micro_batch, "Micro-batch size (default: the model's smallest)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--iterations", options.iterations, "Timed iterations (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  command->add_option("--warmup", options.warmup, "Untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  command->add_option("-o,--output", options.output, "Write the cluster description with measured_layer_time here");
  command->add_flag("--json", options.json, "Print JSON for programs instead of a table");
  command->add_option("--worker-results", options.worker_results)->group("");  // internal: one device's run
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
