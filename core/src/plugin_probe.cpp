#include "plugin_probe.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "h2/child_process.hpp"
#include "h2/error.hpp"
#include "plugin_loader.hpp"
#include "plugin_search.hpp"

namespace h2::detail {

namespace {

constexpr const char* kReturned = "returned";

std::string seconds_text(double seconds) {  // "60", "0.5"
  std::ostringstream text;
  text << seconds;
  return text.str();
}

}  // namespace

double plugin_probe_timeout() {
  const char* text = std::getenv("H2_PLUGIN_PROBE_TIMEOUT");
  if (text == nullptr || *text == '\0') return 60;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 3600)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                std::string("H2_PLUGIN_PROBE_TIMEOUT='") + text + "': expected seconds from 0 (no probe) to 3600");
  return seconds;
}

std::optional<PluginInfo> probe_plugin(const std::filesystem::path& path,
                                       const std::map<std::string, PluginOptions>& options, double timeout_seconds) {
  const ChildOutcome outcome = run_in_child(
      [&](const auto& emit) {
        // Its state does not matter here, only that loading returns. The plugin is never shut down
        // or unloaded in the child (a plugin that fails there but loads fine is not crashed); the
        // child ends with _exit.
        new LoadedPlugin(load_plugin(path, options));
        emit(kReturned);
      },
      timeout_seconds);
  const bool returned = !outcome.lines.empty() && outcome.lines.back() == kReturned;
  if (returned && outcome.exited && outcome.exit_code == 0) return std::nullopt;

  PluginInfo info;
  info.path = path.string();
  info.name = plugin_name_from_file(path).value_or(path.filename().string());
  const std::string where = "while a child process loaded it (not loaded here)";
  if (outcome.timed_out) {
    info.state = PluginState::hung;
    info.message = state_message(info.state, "loading did not finish within " + seconds_text(timeout_seconds) + " s " +
                                                 where + "; H2_PLUGIN_PROBE_TIMEOUT sets the limit");
  } else if (!outcome.signal.empty()) {
    info.state = PluginState::crashed;
    info.message = state_message(info.state, "killed by " + outcome.signal + " " + where);
  } else {
    info.state = PluginState::crashed;
    info.message = state_message(info.state, "the process ended with exit code " + std::to_string(outcome.exit_code) +
                                                 " " + where + " (the plugin called exit?)");
  }
  return info;
}

}  // namespace h2::detail
