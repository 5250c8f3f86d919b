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
#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/optimizer.hpp"
#include "launch_command.hpp"
#include "local_cluster.hpp"
#include "plugin_option_args.hpp"
#include "table.hpp"

namespace h2::tools {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "h2 profile";

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::vector<int> micro_batches_of(const ProfileOptions& options, const heteroauto::Model& model) {
  if (options.micro_batch > 0) return {options.micro_batch};
  std::vector<int> sizes = model.micro_batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

using Clock = std::chrono::steady_clock;

double milliseconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Median forward and backward time of `stage` on `input` over the timed iterations, after warm-up.
nlohmann::json time_stage(const ProfileOptions& options, heteropp::GptStage& stage, Stream& stream, const Tensor& input,
                          const Tensor& targets, const Tensor& grad_output, int micro_batch) {
  std::vector<double> forward_ms, backward_ms;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    stage.forward(i, input, targets);
    stream.synchronize();
    const Clock::time_point middle = Clock::now();
    stage.backward(i, grad_output);
    stream.synchronize();
    const Clock::time_point end = Clock::now();
    if (i < options.warmup) continue;
    forward_ms.push_back(milliseconds(start, middle));
    backward_ms.push_back(milliseconds(middle, end));
  }
  return {{"micro_batch", micro_batch}, {"forward_ms", median(forward_ms)}, {"backward_ms", median(backward_ms)}};
}

// What a step does per parameter after the backward passes: zero the gradients (before the next
// step), their norm, AdamW. Measured over one layer's parameters.
double optimizer_ns_per_parameter(const ProfileOptions& options, heteropp::GptStage& layer, Stream& stream) {
  heteropp::AdamW optimizer(layer, stream, {});
  std::vector<Tensor> grads;
  int64_t parameters = 0;
  for (const heteropp::Parameter& p : layer.parameters()) {
    grads.push_back(p.grad);
    parameters += p.value.numel();
  }
  const Tensor norm = Tensor::empty(stream.device(), {1}, DType::f32);
  std::vector<double> ms;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    stream.synchronize();
    const Clock::time_point start = Clock::now();
    ops::grad_norm(stream, grads, norm);
    optimizer.step(1e-4, 1.0, i + 1);
    layer.zero_grads();
    stream.synchronize();
    if (i >= options.warmup) ms.push_back(milliseconds(start, Clock::now()));
  }
  return median(ms) * 1e6 / static_cast<double>(parameters);
}

// One device: a layer, the embedding and the head as stages of their own, at each micro-batch size; then the optimizer.
// Every rank measures the same part at the same time (a barrier before each), so devices that share cores contend as
// they do in training.
int run_worker(const ProfileOptions& options) {
  const heteroauto::Model model = heteroauto::load_model(options.model);
  RuntimeOptions runtime_options = dicomm::runtime_options_for_device();
  runtime_options.plugin_options = parse_plugin_options(options.plugin_options);
  Runtime runtime{runtime_options};
  const Device device = dicomm::select_device(runtime, dicomm::rank_info_from_environment());
  Stream stream = device.create_stream();
  dicomm::Communicator world = dicomm::Communicator::world();
  const heteropp::GptConfig config = heteropp::GptConfig::from_model(model, 1);
  const int last = config.layers;
  heteropp::GptStage layer(config, 0, 1, false, false, device, stream);
  heteropp::GptStage embedding(config, 0, 0, true, false, device, stream);
  heteropp::GptStage head(config, last, last, false, true, device, stream);
  nlohmann::json result = {{"device", device.label()}};
  for (int b : micro_batches_of(options, model)) {
    const int64_t batch = b;
    std::vector<double> token_values(static_cast<size_t>(batch * model.seq_len));
    for (size_t i = 0; i < token_values.size(); ++i)
      token_values[i] = static_cast<double>((i * 7919) % static_cast<size_t>(model.vocab));
    const Tensor tokens = Tensor::from_host(stream, token_values, {batch, model.seq_len}, DType::i64);
    // Inputs of the scale the model sees: the embedding's output, and the loss's gradient through
    // the head.
    const Tensor x = embedding.forward(-1, tokens);
    head.forward(-1, x, tokens);
    const Tensor dy = head.backward(-1, {}, 1.0 / static_cast<double>(batch * model.seq_len));
    embedding.backward(-1, dy);
    stream.synchronize();
    world.barrier();
    result["layer"].push_back(time_stage(options, layer, stream, x, {}, dy, b));
    world.barrier();
    result["embedding"].push_back(time_stage(options, embedding, stream, tokens, {}, dy, b));
    world.barrier();
    result["head"].push_back(time_stage(options, head, stream, x, tokens, {}, b));
  }
  world.barrier();
  result["optimizer_ns_per_parameter"] = optimizer_ns_per_parameter(options, layer, stream);
  const char* rank = std::getenv("H2_RANK");
  std::ofstream out(fs::path(options.worker_results) / ("rank-" + std::string(rank ? rank : "0")));
  out << result.dump() << "\n";
  return out ? 0 : 1;
}

// The mean over a device type's devices of their medians, point by point.
nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices) {
  nlohmann::json mean = devices.front();
  mean.erase("device");
  const double n = static_cast<double>(devices.size());
  for (const char* part : {"layer", "embedding", "head"})
    for (size_t i = 0; i < mean[part].size(); ++i)
      for (const char* field : {"forward_ms", "backward_ms"}) {
        double sum = 0;
        for (const nlohmann::json& d : devices) sum += d[part][i][field].get<double>();
        mean[part][i][field] = sum / n;
      }
  double sum = 0;
  for (const nlohmann::json& d : devices) sum += d["optimizer_ns_per_parameter"].get<double>();
  mean["optimizer_ns_per_parameter"] = sum / n;
  return mean;
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

  const fs::path results = fs::temp_directory_path() / ("h2-profile-" + std::to_string(::getpid()));
  fs::create_directories(results);
  LaunchOptions launch;
  launch.ranks = ranks;
  for (const heteropp::LocalDevice& d : devices.devices)
    launch.devices += (launch.devices.empty() ? "" : ",") + d.label;
  launch.command = {self_executable(),  "profile",
                    "--cluster",        options.cluster,
                    "--model",          options.model,
                    "--iterations",     std::to_string(options.iterations),
                    "--warmup",         std::to_string(options.warmup),
                    "--worker-results", results.string()};
  if (options.micro_batch > 0) {
    launch.command.push_back("--micro-batch");
    launch.command.push_back(std::to_string(options.micro_batch));
  }
  for (const std::string& arg : plugin_option_args(plugin_options)) launch.command.push_back(arg);
  std::string size_list;
  for (int b : sizes) size_list += (size_list.empty() ? "" : ", ") + std::to_string(b);
  std::cout << "Profiling " << model.name << " (a layer, the embedding, the head and the optimizer; micro-batch "
            << size_list << ") on " << ranks << (ranks == 1 ? " device" : " devices") << " at once ..." << std::endl;
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
  const heteroauto::CostModel cost(cluster, model);
  Table table({"device type", "devices", "micro-batch", "layer fwd / bwd", "embedding fwd / bwd", "head fwd / bwd",
               "peak x efficiency layer fwd"});
  nlohmann::json measured = nlohmann::json::object();
  std::string optimizer_line;
  for (nlohmann::json& type : described.at("device_types")) {
    const std::string name = type.at("name");
    if (!by_type.count(name)) continue;
    const nlohmann::json profile = mean_profile(by_type[name]);
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
                     predicted});
    }
    optimizer_line += (optimizer_line.empty() ? "" : ", ") + name + " " +
                      format_fixed(profile["optimizer_ns_per_parameter"].get<double>(), 2, " ns");
  }
  if (options.json) {
    std::cout << nlohmann::json({{"model", model.name}, {"measured", measured}}).dump(2) << "\n";
  } else {
    table.print(std::cout, 0);
    std::cout << "optimizer per parameter per step (zero, norm, AdamW): " << optimizer_line << "\n";
  }
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
  command->add_option("--iterations", options.iterations, "Timed iterations (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  command->add_option("--warmup", options.warmup, "Untimed iterations first")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  command->add_option("-o,--output", options.output, "Write the cluster description with the measured profile here");
  command->add_flag("--json", options.json, "Print JSON for programs instead of a table");
  add_plugin_option_flag(command, options.plugin_options);
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
