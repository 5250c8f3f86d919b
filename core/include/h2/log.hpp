// Logging shared by the core and, through the logger callback passed at initialize, by plugins.
// By default lines go to stderr as "h2 [level] source: message"; H2_LOG_LEVEL (error, warning,
// info, debug) sets how much is printed (default: warning).
#pragma once

#include <functional>
#include <string_view>

#include "h2/plugin_abi.h"

namespace h2 {

enum class LogLevel { error = H2_LOG_ERROR, warning = H2_LOG_WARNING, info = H2_LOG_INFO, debug = H2_LOG_DEBUG };

using LogSink = std::function<void(LogLevel level, std::string_view source, std::string_view message)>;

// Replaces where log lines go (nullptr restores stderr). Thread-safe.
void set_log_sink(LogSink sink);
// The most verbose level that is printed.
LogLevel log_level();
void set_log_level(LogLevel level);

void log(LogLevel level, std::string_view source, std::string_view message);

}  // namespace h2
