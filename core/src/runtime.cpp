#include "h2/runtime.hpp"

#include <cstdlib>
#include <map>
#include <set>

#include "h2/child_process.hpp"
#include "h2/error.hpp"
#include "h2/log.hpp"
#include "plugin_loader.hpp"
#include "plugin_probe.hpp"
#include "plugin_search.hpp"

namespace h2 {

namespace fs = std::filesystem;

std::string_view plugin_state_name(PluginState state) {
  switch (state) {
    case PluginState::loaded: return "loaded";
    case PluginState::not_installed: return "not installed";
    case PluginState::not_a_library: return "not a shared library";
    case PluginState::load_failed: return "load failed";
    case PluginState::no_entry_point: return "entry point missing";
    case PluginState::abi_mismatch: return "ABI mismatch";
    case PluginState::invalid_table: return "invalid API table";
    case PluginState::runtime_missing: return "vendor runtime missing";
    case PluginState::no_device: return "no device";
    case PluginState::init_failed: return "init failed";
    case PluginState::duplicate: return "duplicate";
    case PluginState::crashed: return "crashed";
    case PluginState::hung: return "hung";
  }
  return "unknown";
}

std::vector<fs::path> Runtime::default_search_path() {
  std::vector<fs::path> path;
  if (const char* env = std::getenv("H2_PLUGIN_PATH")) path = detail::split_search_path(env);
  // The install directory exists only once H2 is installed; a build tree relies on H2_PLUGIN_PATH.
  std::error_code ec;
  if (fs::is_directory(H2_PLUGIN_INSTALL_DIR, ec)) path.emplace_back(H2_PLUGIN_INSTALL_DIR);
  return path;
}

Runtime::Runtime(const RuntimeOptions& options) {
  const std::vector<fs::path> search_path = options.search_path.value_or(default_search_path());

  // Which files to load, in order.
  std::vector<std::pair<fs::path, std::string>> candidates;  // (path, name it was asked for)
  if (options.plugins.empty()) {
    for (const fs::path& path : detail::discover_plugins(search_path)) candidates.emplace_back(path, "");
  } else {
    for (const std::string& spec : options.plugins) {
      if (detail::looks_like_path(spec)) {
        candidates.emplace_back(spec, "");
      } else if (auto found = detail::find_plugin(spec, search_path)) {
        candidates.emplace_back(*found, spec);
      } else {
        PluginInfo info;
        info.name = spec;
        info.state = PluginState::not_installed;
        std::string where;
        for (size_t i = 0; i < search_path.size(); ++i) where += (i ? ":" : "") + search_path[i].string();
        // An empty path is what a build tree run outside `meson devenv` has: say so, not "()".
        info.message = detail::state_message(
            info.state,
            "no " + detail::plugin_file_name(spec) + " in the plugin search path (" +
                (where.empty() ? "empty: no installed plugin directory and no H2_PLUGIN_PATH; set it to the "
                                 "directory that holds the plugin, or run through meson devenv -C build)"
                               : where + "; set H2_PLUGIN_PATH)"));
        plugins_.push_back(std::move(info));
      }
    }
  }

  // Each plugin not loaded in this process yet is first loaded in a child process, all of them before
  // any is loaded here: a fork is safe only while the process has one thread (see run_in_child), and
  // a loaded plugin may start threads.
  const double probe_seconds = options.probe_timeout_seconds.value_or(detail::plugin_probe_timeout());
  std::map<fs::path, PluginInfo> failed_probes;
  if (probe_seconds > 0 && process_is_single_threaded()) {
    for (const auto& candidate : candidates) {
      const fs::path& path = candidate.first;
      std::error_code ec;
      if (failed_probes.count(path) || !fs::is_regular_file(path, ec) || detail::plugin_is_live(path)) continue;
      if (std::optional<PluginInfo> failed = detail::probe_plugin(path, options.plugin_options, probe_seconds)) {
        log(LogLevel::debug, "core", "plugin " + failed->path + ": " + failed->message);
        failed_probes.emplace(path, std::move(*failed));
      }
    }
  }

  std::set<fs::path> seen_files;
  for (const auto& [path, asked_name] : candidates) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (ec) canonical = path;
    if (!seen_files.insert(canonical).second) continue;  // the same file listed twice

    if (const auto failed = failed_probes.find(path); failed != failed_probes.end()) {
      plugins_.push_back(failed->second);
      continue;
    }
    detail::LoadedPlugin loaded = detail::load_plugin(path, options.plugin_options);
    if (loaded.info.loaded()) {
      bool duplicate = false;
      for (const PluginInfo& other : plugins_) {
        if (other.loaded() && other.name == loaded.info.name) {
          loaded.info.state = PluginState::duplicate;
          loaded.info.message = detail::state_message(
              PluginState::duplicate, "a plugin named '" + other.name + "' was already loaded from " + other.path);
          loaded.info.device_count = 0;
          duplicate = true;
          break;
        }
      }
      if (!duplicate) {
        for (size_t i = 0; i < loaded.devices.size(); ++i)
          devices_.emplace_back(loaded.handle, static_cast<int>(i), std::move(loaded.devices[i]));
      }
    }
    if (!asked_name.empty() && loaded.info.loaded() && loaded.info.name != asked_name)
      log(LogLevel::warning, "core",
          "plugin file " + path.string() + " calls itself '" + loaded.info.name + "', not '" + asked_name + "'");
    plugins_.push_back(std::move(loaded.info));
  }
}

Runtime::~Runtime() = default;

std::vector<Device> Runtime::devices(std::string_view plugin) const {
  std::vector<Device> result;
  for (const Device& device : devices_)
    if (device.plugin_name() == plugin) result.push_back(device);
  return result;
}

Device Runtime::device(std::string_view plugin, int index) const {
  for (const PluginInfo& info : plugins_) {
    if (info.name != plugin) continue;
    if (!info.loaded())
      throw Error(H2_STATUS_INVALID_ARGUMENT, "plugin '" + info.name + "' is not usable: " + info.message);
    std::vector<Device> found = devices(plugin);
    if (index < 0 || index >= static_cast<int>(found.size()))
      throw Error(H2_STATUS_INVALID_ARGUMENT, "plugin '" + info.name + "' has no device " + std::to_string(index) +
                                                  " (it has " + std::to_string(found.size()) + ")");
    return found[static_cast<size_t>(index)];
  }
  throw Error(H2_STATUS_INVALID_ARGUMENT, "no plugin named '" + std::string(plugin) + "' was loaded");
}

}  // namespace h2
