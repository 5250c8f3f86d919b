#include "h2/dicomm/device_select.hpp"

#include <cstdlib>
#include <string>

#include "h2/error.hpp"

namespace h2::dicomm {

namespace {

struct Choice {
  std::string plugin;
  int index = -1;  // -1: by local rank
};

// `value` is PLUGIN[:INDEX]; `what` names where it came from in errors ("H2_DEVICE", "device").
Choice parse_choice(const std::string& value, const char* what) {
  if (value.empty()) return {};
  Choice choice;
  const size_t colon = value.rfind(':');
  choice.plugin = value.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string index = value.substr(colon + 1);
    char* end = nullptr;
    const long parsed = std::strtol(index.c_str(), &end, 10);
    if (index.empty() || *end != '\0' || parsed < 0)
      throw Error(H2_STATUS_INVALID_ARGUMENT,
                  std::string(what) + "='" + value + "': '" + index + "' is not a device index");
    choice.index = static_cast<int>(parsed);
  }
  if (choice.plugin.empty())
    throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(what) + "='" + value + "' names no plugin");
  return choice;
}

RuntimeOptions options_for(const Choice& choice) {
  RuntimeOptions options;
  if (!choice.plugin.empty()) options.plugins = {choice.plugin};
  return options;
}

Device select(const Runtime& runtime, const RankInfo& info, Choice choice) {
  // A plugin given by its file: devices are listed under the name the plugin reports.
  for (const PluginInfo& plugin : runtime.plugins())
    if (plugin.loaded() && plugin.path == choice.plugin) choice.plugin = plugin.name;
  if (choice.plugin.empty()) {
    if (runtime.devices().empty()) throw Error(H2_STATUS_NO_DEVICE, "no device: no plugin loaded any (see h2 devices)");
    const std::string& plugin = runtime.devices().front().plugin_name();
    const auto devices = runtime.devices(plugin);
    return devices[static_cast<size_t>(info.local_rank) % devices.size()];
  }
  if (choice.index >= 0) return runtime.device(choice.plugin, choice.index);
  const auto devices = runtime.devices(choice.plugin);
  if (devices.empty()) return runtime.device(choice.plugin, 0);  // throws naming the plugin's state
  return devices[static_cast<size_t>(info.local_rank) % devices.size()];
}

}  // namespace

std::string device_from_environment() {
  const char* text = std::getenv("H2_DEVICE");
  return text != nullptr ? text : "";
}

RuntimeOptions runtime_options_for_device() {
  return options_for(parse_choice(device_from_environment(), "H2_DEVICE"));
}

RuntimeOptions runtime_options_for_device(const std::string& device) {
  return options_for(parse_choice(device, "device"));
}

Device select_device(const Runtime& runtime, const RankInfo& info) {
  return select(runtime, info, parse_choice(device_from_environment(), "H2_DEVICE"));
}

Device select_device(const Runtime& runtime, const RankInfo& info, const std::string& device) {
  return select(runtime, info, parse_choice(device, "device"));
}

}  // namespace h2::dicomm
