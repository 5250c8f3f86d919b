#include "plugin_handle.hpp"

#include "h2/log.hpp"

namespace h2::detail {

PluginHandle::PluginHandle(std::shared_ptr<void> library, const H2_PluginApi& api, std::string name)
    : library_(std::move(library)), api_(api), name_(std::move(name)) {}

PluginHandle::~PluginHandle() {
  if (!initialized_) return;
  H2_Status status = api_.shutdown();
  if (status != H2_STATUS_OK) log(LogLevel::warning, name_, std::string("shutdown failed: ") + api_.last_error());
}

void PluginHandle::check(H2_Status status, const std::string& what) const {
  if (status == H2_STATUS_OK) return;
  const char* message = api_.last_error();
  std::string text = name_ + ": " + what + ": " + status_name(status);
  if (message != nullptr && *message != '\0') text += ": " + std::string(message);
  throw Error(status, text);
}

void PluginHandle::unsupported(const char* call) const {
  throw Error(H2_STATUS_UNSUPPORTED, name_ + " does not support " + call);
}

void plugin_log_callback(void* user_data, H2_LogLevel level, const char* message) {
  const auto* plugin = static_cast<const PluginHandle*>(user_data);
  log(static_cast<LogLevel>(level), plugin->name(), message != nullptr ? message : "");
}

}  // namespace h2::detail
