#include "devices_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "devices_options.hpp"
#include "format.hpp"
#include "h2/dicomm/data_paths.hpp"
#include "h2/dicomm/nics.hpp"
#include "h2/h2.hpp"
#include "h2/plugin_comm.hpp"
#include "h2/version.hpp"
#include "plugin_option_args.hpp"
#include "table.hpp"

namespace h2::tools {

namespace {

using json = nlohmann::ordered_json;

std::vector<std::string> nic_direct_kinds(const DeviceProperties& props) {
  std::vector<std::string> kinds;
  if (props.nic_direct_host) kinds.emplace_back("host");
  if (props.nic_direct_cuda) kinds.emplace_back("cuda");
  if (props.nic_direct_dmabuf) kinds.emplace_back("dmabuf");
  return kinds;
}

std::vector<std::string> dtype_names(const std::vector<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType dtype : dtypes) names.emplace_back(dtype_name(dtype));
  return names;
}

json device_json(const Device& device) {
  const DeviceProperties& p = device.properties();
  json peak = json::object();
  for (const auto& [dtype, flops] : p.peak_flops) peak[std::string(dtype_name(dtype))] = flops;
  json j = {
      {"index", device.index()},
      {"label", device.label()},
      {"name", p.name},
      {"vendor", p.vendor},
      {"kind", std::string(device_kind_name(p.kind))},
      {"bus_id", p.bus_id},
      {"compute_units", p.compute_units},
      {"total_memory_bytes", p.total_memory_bytes},
      {"memory_bandwidth_bytes_per_s", p.memory_bandwidth_bytes_per_s},
      {"peak_flops", peak},
      {"supported_dtypes", dtype_names(p.supported_dtypes)},
      {"nic_direct_memory", nic_direct_kinds(p)},
      {"host_accessible", p.host_accessible},
  };
  try {
    j["free_memory_bytes"] = device.memory_info().free_bytes;
  } catch (const Error&) {
    j["free_memory_bytes"] = nullptr;  // mem_info is optional
  }
  return j;
}

// The collective library (ABI 1.5) a loaded plugin offers on its devices, or nullopt.
std::optional<CollectiveLibrary> collective_library(const PluginInfo& info, const Runtime& runtime) {
  if (!info.loaded()) return std::nullopt;
  const std::vector<Device> devices = runtime.devices(info.name);
  return devices.empty() ? std::nullopt : PluginComm::library(devices.front());
}

json plugin_json(const PluginInfo& info, const Runtime& runtime) {
  json j = {
      {"name", info.name},
      {"path", info.path},
      {"state", std::string(plugin_state_name(info.state))},
      {"loaded", info.loaded()},
      {"message", info.message},
      {"version", info.version},
      {"abi", info.abi_major == 0 ? json(nullptr) : json{{"major", info.abi_major}, {"minor", info.abi_minor}}},
  };
  const std::optional<CollectiveLibrary> library = collective_library(info, runtime);
  j["collective_library"] =
      library ? json{{"name", library->name}, {"scope", library->scope == CommScope::node ? "node" : "network"}}
              : json(nullptr);
  json devices = json::array();
  if (info.loaded())
    for (const Device& device : runtime.devices(info.name)) devices.push_back(device_json(device));
  j["devices"] = devices;
  return j;
}

std::string abi_text(const PluginInfo& info) {
  return info.abi_major == 0 ? "-" : std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor);
}

void print_human(const Runtime& runtime, const std::vector<std::filesystem::path>& search_path) {
  std::vector<std::string> dirs;
  for (const auto& entry : search_path) dirs.push_back(entry.string());
  std::cout << "H2 " << H2_VERSION << ", plugin ABI " << H2_ABI_MAJOR << "." << H2_ABI_MINOR << "\n";
  std::cout << "Plugin search path: " << join(dirs, ":") << "\n\n";

  Table plugins({"PLUGIN", "ABI", "VERSION", "STATUS", "DEVICES", "COLLECTIVES", "FILE"});
  for (const PluginInfo& info : runtime.plugins()) {
    const std::optional<CollectiveLibrary> library = collective_library(info, runtime);
    plugins.add_row({info.name, abi_text(info), info.version.empty() ? "-" : info.version,
                     std::string(plugin_state_name(info.state)),
                     info.loaded() ? std::to_string(info.device_count) : "-",
                     library ? library->name + (library->scope == CommScope::node ? " (one node)" : "") : "-",
                     info.path.empty() ? "-" : info.path});
  }
  std::cout << "Plugins\n";
  if (plugins.empty()) {
    std::cout << "  none found; build H2 or set H2_PLUGIN_PATH to the directory of libh2-plugin-*.so files\n";
  } else {
    plugins.print(std::cout);
  }
  for (const PluginInfo& info : runtime.plugins())
    if (!info.loaded()) std::cout << "  " << info.name << ": " << info.message << "\n";

  if (runtime.devices().empty()) return;
  Table devices({"DEVICE", "NAME", "VENDOR", "KIND", "MEMORY", "FREE", "BANDWIDTH", "PEAK F32", "PEAK BF16", "DTYPES",
                 "NIC-DIRECT", "HOST-ACCESS"});
  for (const Device& device : runtime.devices()) {
    const DeviceProperties& p = device.properties();
    auto peak = [&](DType dtype) {
      auto it = p.peak_flops.find(dtype);
      return format_rate(it == p.peak_flops.end() ? 0 : it->second, "FLOP/s");
    };
    std::string free = "-";
    try {
      free = format_bytes(device.memory_info().free_bytes);
    } catch (const Error&) {
    }
    std::vector<std::string> nic = nic_direct_kinds(p);
    devices.add_row({device.label(), p.name, p.vendor, std::string(device_kind_name(p.kind)),
                     format_bytes(p.total_memory_bytes), free, format_rate(p.memory_bandwidth_bytes_per_s, "B/s"),
                     peak(DType::f32), peak(DType::bf16), join(dtype_names(p.supported_dtypes), ","),
                     nic.empty() ? "-" : join(nic, ","), p.host_accessible ? "yes" : "no"});
  }
  std::cout << "\nDevices\n";
  devices.print(std::cout);
}

// ---- --nics ----

using dicomm::LinkLayer;
using dicomm::Nic;
using dicomm::NicDiscovery;

// "2.5", "100": the planner's bandwidth figures, and part of a suggested NIC type's name.
std::string gbps_text(double gbps) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", gbps);
  return text;
}

// The planner's NIC kind ("type" in a cluster description's nic_types); "" for a layer it has no
// kind for (loopback, unknown).
std::string planner_nic_type(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::infiniband: return "infiniband";
    case LinkLayer::roce: return "roce";
    case LinkLayer::ethernet: return "ethernet";
    default: return "";
  }
}

// One nic_types entry per distinct (type, speed) among the NICs that can carry a job's traffic: up,
// not the loopback, with a known speed. An RDMA port stands for its netdev, which is the same link
// seen by IP: counting both would offer an "ethernet" type for every RoCE port. latency_us is left
// out: it is not measured here, and the planner then assumes its default.
json planner_nic_types(const NicDiscovery& discovery) {
  std::set<std::string> rdma_netdevs;
  for (const Nic& nic : discovery.nics)
    if (nic.rdma && !nic.netdev.empty()) rdma_netdevs.insert(nic.netdev);
  std::set<std::pair<std::string, double>> seen;
  json types = json::array();
  for (const Nic& nic : discovery.nics) {
    const std::string type = planner_nic_type(nic.link_layer);
    if (!nic.up || type.empty() || nic.speed_gbps <= 0) continue;
    if (!nic.rdma && rdma_netdevs.count(nic.name)) continue;
    if (!seen.insert({type, nic.speed_gbps}).second) continue;
    types.push_back(
        {{"name", type + "-" + gbps_text(nic.speed_gbps)}, {"type", type}, {"bandwidth_gbps", nic.speed_gbps}});
  }
  return types;
}

constexpr const char* kNicTypesNote =
    "nic_types has one entry per distinct (type, speed) among the up, non-loopback NICs whose speed is known (an "
    "RDMA port stands for its netdev), in the schema of a cluster description's nic_types. latency_us is not "
    "measured by discovery and is left out, so the planner assumes its default of 5 us; set it from a measurement "
    "(for example fi_pingpong between two nodes) where it matters.";

json nic_json(const Nic& nic) {
  return {
      {"name", nic.name},
      {"link_layer", dicomm::link_layer_name(nic.link_layer)},
      {"speed_gbps", nic.speed_gbps > 0 ? json(nic.speed_gbps) : json(nullptr)},
      {"up", nic.up},
      {"addresses", nic.addresses},
      {"providers", nic.providers},
      {"netdev", nic.netdev.empty() ? json(nullptr) : json(nic.netdev)},
      {"rdma", nic.rdma},
  };
}

json nics_json(const NicDiscovery& discovery) {
  json nics = json::array();
  for (const Nic& nic : discovery.nics) nics.push_back(nic_json(nic));
  return {
      {"nics", nics},
      {"rdma_status", discovery.rdma_status},
      {"libfabric",
       {{"version", discovery.libfabric_version},
        {"providers", discovery.providers},
        {"status", discovery.libfabric_status}}},
      {"nic_types", planner_nic_types(discovery)},
      {"note", kNicTypesNote},
  };
}

void print_nics(const NicDiscovery& discovery) {
  Table table({"NIC", "LINK", "SPEED", "STATE", "ADDRESSES", "PROVIDERS", "NETDEV"});
  for (const Nic& nic : discovery.nics) {
    std::string speed = "unknown";
    if (nic.link_layer == LinkLayer::loopback) speed = "-";  // no line rate to report
    if (nic.speed_gbps > 0) speed = gbps_text(nic.speed_gbps) + " Gb/s";
    table.add_row({nic.name, dicomm::link_layer_name(nic.link_layer), speed, nic.up ? "up" : "down",
                   nic.addresses.empty() ? "-" : join(nic.addresses, ","),
                   nic.providers.empty() ? "-" : join(nic.providers, ","), nic.netdev.empty() ? "-" : nic.netdev});
  }
  std::cout << "NICs\n";
  if (table.empty()) {
    std::cout << "  none found\n";
  } else {
    table.print(std::cout);
  }

  const bool any_rdma = std::any_of(discovery.nics.begin(), discovery.nics.end(), [](const Nic& n) { return n.rdma; });
  if (!any_rdma) {
    std::cout << "\nRDMA: no devices (" << discovery.rdma_status << ")\n";
  } else if (!discovery.rdma_status.empty()) {
    std::cout << "\nRDMA: " << discovery.rdma_status << "\n";
  }
  std::cout << (any_rdma ? "\n" : "") << "libfabric " << discovery.libfabric_version << ": ";
  if (discovery.providers.empty()) {
    std::cout << "no RDM provider with tagged messages (" << discovery.libfabric_status << ")\n";
  } else {
    std::cout << "RDM providers " << join(discovery.providers, ", ") << "\n";
  }

  const json types = planner_nic_types(discovery);
  std::vector<std::string> names;
  for (const auto& type : types) names.push_back(type["name"].get<std::string>());
  std::cout << "Planner nic_types (--json prints them to paste into a cluster description): "
            << (names.empty() ? "none (no up, non-loopback NIC reports its speed)" : join(names, ", ")) << "\n";
}

}  // namespace

void add_devices_command(CLI::App& app, DevicesOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand("devices", "List plugins, their status and their devices");
  command->add_flag("--json", options.json, "Print JSON for programs instead of tables");
  CLI::Option* plugin = command->add_option(
      "--plugin", options.plugins,
      "Load only this plugin: a NAME (libh2-plugin-NAME.so in the search path) or a PATH; repeatable");
  // NICs replace the plugin listing rather than add to it: they answer another question (what the
  // fabric and the planner see), and plugin problems must not decide the exit code of NIC discovery.
  CLI::Option* nics =
      command->add_flag("--nics", options.nics,
                        "List this node's NICs (RDMA ports, IP interfaces, libfabric providers) and the planner's "
                        "nic_types for them, instead of plugins and devices");
  nics->excludes(plugin);
  CLI::Option* plugin_options = add_plugin_option_flag(command, options.plugin_options);
  nics->excludes(plugin_options);
  command
      ->add_flag("--options", options.options,
                 "List the option keys of the --plugin plugins (key, default, description), read without "
                 "initializing them, instead of their devices")
      ->needs(plugin)
      ->excludes(plugin_options);
  command->callback([&options, &exit_code] {
    if (options.nics) {
      exit_code = run_nics(options.json);
    } else {
      exit_code = options.options ? run_devices_options(options.plugins, options.json) : run_devices(options);
    }
  });
}

int run_devices(const DevicesOptions& options) {
  RuntimeOptions runtime_options;
  runtime_options.plugins = options.plugins;
  try {
    runtime_options.plugin_options = parse_plugin_options(options.plugin_options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "h2 devices: " << e.what() << "\n";
    return 2;
  }
  const Runtime runtime(runtime_options);
  const auto search_path = Runtime::default_search_path();
  // Options the user named for a plugin that is not there would otherwise do nothing, unseen.
  for (const auto& entry : runtime_options.plugin_options) {
    const auto& found = runtime.plugins();
    if (std::none_of(found.begin(), found.end(), [&](const PluginInfo& info) { return info.name == entry.first; })) {
      std::cerr << "h2 devices: --plugin-option names plugin '" << entry.first << "', which was not found\n";
      return 2;
    }
  }

  if (options.json) {
    json out = {{"h2_version", H2_VERSION}, {"abi", {{"major", H2_ABI_MAJOR}, {"minor", H2_ABI_MINOR}}}};
    json path = json::array();
    for (const auto& entry : search_path) path.push_back(entry.string());
    out["search_path"] = path;
    json plugins = json::array();
    for (const PluginInfo& info : runtime.plugins()) plugins.push_back(plugin_json(info, runtime));
    out["plugins"] = plugins;
    std::cout << out.dump(2) << "\n";
  } else {
    print_human(runtime, search_path);
  }

  // Explicitly requested plugins must all be usable. When listing everything, a plugin that merely
  // lacks its hardware or vendor runtime is not an error, but a broken one is.
  bool failed = runtime.plugins().empty();
  for (const PluginInfo& info : runtime.plugins()) {
    if (info.loaded()) continue;
    if (!options.plugins.empty() || !info.unavailable()) failed = true;
  }
  if (runtime.plugins().empty()) std::cerr << "h2 devices: no plugins found\n";
  return failed ? 1 : 0;
}

int run_nics(bool json_output) {
  NicDiscovery discovery;
  try {
    discovery = dicomm::discover_nics();
  } catch (const std::exception& error) {  // a missing RDMA stack is not one of these; it is reported
    std::cerr << "h2 devices --nics: " << error.what() << "\n";
    return 1;
  }
  // How DiComm moves each plugin's device memory over these NICs (the plugins in the search path
  // that load; one that does not is `h2 devices`' business, not the NICs').
  const Runtime runtime{RuntimeOptions{}};
  json paths = json::array();
  Table table({"PLUGIN", "TRAFFIC", "PATH", "WHY"});
  for (const PluginInfo& info : runtime.plugins()) {
    const std::vector<Device> devices = info.loaded() ? runtime.devices(info.name) : std::vector<Device>{};
    if (devices.empty()) continue;
    dicomm::DeviceMemoryPath path;
    dicomm::CollectivePath sums;
    try {
      path = dicomm::device_memory_path(devices.front());
      sums = dicomm::collective_path(devices.front());
    } catch (const std::exception& error) {  // a bad H2_DICOMM_* setting
      std::cerr << "h2 devices --nics: " << error.what() << "\n";
      return 1;
    }
    paths.push_back({{"plugin", info.name},
                     {"device_direct", path.direct},
                     {"why", path.why},
                     {"collectives",
                      {{"device_direct", sums.direct}, {"vendor_library", sums.vendor_library}, {"why", sums.why}}}});
    const size_t colon = path.why.find(':');
    table.add_row({info.name, "point-to-point", path.direct ? "device-direct" : "staged",
                   colon == std::string::npos ? path.why : path.why.substr(colon + 2)});
    table.add_row({"", "sums between nodes", sums.direct ? "device-direct" : "staged", sums.why});
  }
  if (json_output) {
    json out = nics_json(discovery);
    out["device_memory"] = paths;
    std::cout << out.dump(2) << "\n";
  } else {
    print_nics(discovery);
    std::cout << "\nDevice memory on the network (DiComm)\n";
    if (table.empty()) {
      std::cout << "  no plugin with a device loaded\n";
    } else {
      table.print(std::cout);
    }
  }
  return 0;
}

}  // namespace h2::tools
