#include "h2/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace h2 {

namespace {

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warning: return "warning";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

LogLevel level_from_environment() {
  const char* value = std::getenv("H2_LOG_LEVEL");
  if (value == nullptr) return LogLevel::warning;
  for (LogLevel level : {LogLevel::error, LogLevel::warning, LogLevel::info, LogLevel::debug})
    if (level_name(level) == value) return level;
  std::fprintf(stderr, "h2 [warning] core: H2_LOG_LEVEL='%s' is not one of error, warning, info, debug\n", value);
  return LogLevel::warning;
}

struct LogState {
  std::mutex mutex;
  LogSink sink;
  LogLevel level = level_from_environment();
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard lock(state().mutex);
  state().sink = std::move(sink);
}

LogLevel log_level() {
  std::lock_guard lock(state().mutex);
  return state().level;
}

void set_log_level(LogLevel level) {
  std::lock_guard lock(state().mutex);
  state().level = level;
}

void log(LogLevel level, std::string_view source, std::string_view message) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  if (level > s.level) return;
  if (s.sink) {
    s.sink(level, source, message);
    return;
  }
  std::fprintf(stderr, "h2 [%.*s] %.*s: %.*s\n", static_cast<int>(level_name(level).size()), level_name(level).data(),
               static_cast<int>(source.size()), source.data(), static_cast<int>(message.size()), message.data());
}

}  // namespace h2
