#include "plugin_option_args.hpp"

#include <CLI/CLI.hpp>
#include <stdexcept>

namespace h2::tools {

namespace {

// Why `spec` is not PLUGIN:KEY=VALUE; "" when it is. The plugin name ends at the first ':' and the key
// at the first '=' after it: a value may hold either ("0000:17:00.0", "a=b"), a name or a key neither.
std::string malformed(const std::string& spec, size_t& colon, size_t& equals) {
  colon = spec.find(':');
  equals = colon == std::string::npos ? std::string::npos : spec.find('=', colon + 1);
  if (colon == 0 || equals == std::string::npos || equals == colon + 1)
    return "'" + spec + "' is not PLUGIN:KEY=VALUE (e.g. cpu-reference:memory=2GiB)";
  return "";
}

}  // namespace

CLI::Option* add_plugin_option_flag(CLI::App* command, std::vector<std::string>& specs) {
  const CLI::Validator well_formed(
      [](std::string& spec) {
        size_t colon = 0, equals = 0;
        return malformed(spec, colon, equals);
      },
      "");
  return command
      ->add_option("--plugin-option", specs,
                   "Pass an option to a plugin when it is loaded, PLUGIN:KEY=VALUE (e.g. cpu-reference:memory=2GiB); "
                   "repeatable. It overrides the plugin's environment variable for that setting; h2 devices --plugin "
                   "NAME --options lists a plugin's keys")
      ->type_name("PLUGIN:KEY=VALUE")
      ->check(well_formed)
      ->allow_extra_args(false);
}

PluginOptionsByName parse_plugin_options(const std::vector<std::string>& specs) {
  PluginOptionsByName options;
  for (const std::string& spec : specs) {
    size_t colon = 0, equals = 0;
    if (const std::string why = malformed(spec, colon, equals); !why.empty())
      throw std::invalid_argument("--plugin-option " + why);
    const std::string plugin = spec.substr(0, colon);
    const std::string key = spec.substr(colon + 1, equals - colon - 1);
    if (!options[plugin].emplace(key, spec.substr(equals + 1)).second)
      throw std::invalid_argument("--plugin-option " + plugin + ":" + key + " is given twice");
  }
  return options;
}

PluginOptionsByName merge_plugin_options(PluginOptionsByName defaults, const PluginOptionsByName& overrides) {
  for (const auto& [plugin, options] : overrides)
    for (const auto& [key, value] : options) defaults[plugin][key] = value;
  return defaults;
}

std::vector<std::string> plugin_option_args(const PluginOptionsByName& options) {
  std::vector<std::string> args;
  for (const auto& [plugin, keys] : options)
    for (const auto& [key, value] : keys)
      args.insert(args.end(), {"--plugin-option", plugin + ":" + key + "=" + value});
  return args;
}

}  // namespace h2::tools
