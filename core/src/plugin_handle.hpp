// A loaded, initialized plugin: the library, a core-owned copy of its API table, and the calls the
// C++ API makes through it. Shared by every Device, buffer, stream and event of the plugin; the
// plugin is shut down and unloaded when the last of them goes away.
#pragma once

#include <memory>
#include <string>

#include "h2/error.hpp"
#include "h2/plugin_abi.h"

namespace h2::detail {

class PluginHandle {
 public:
  // `library` keeps the shared object loaded (an opaque owner: only plugin_loader.cpp knows its type).
  PluginHandle(std::shared_ptr<void> library, const H2_PluginApi& api, std::string name);
  ~PluginHandle();  // shutdown, then unload
  PluginHandle(const PluginHandle&) = delete;
  PluginHandle& operator=(const PluginHandle&) = delete;

  const std::string& name() const { return name_; }
  // The table with every slot the plugin's struct_size does not cover set to NULL.
  const H2_PluginApi& api() const { return api_; }

  // Throws h2::Error "NAME: what: <plugin message>" unless `status` is H2_STATUS_OK.
  void check(H2_Status status, const std::string& what) const;
  // Throws h2::Error(H2_STATUS_UNSUPPORTED) when an optional slot is NULL.
  template <typename Slot>
  Slot require(Slot slot, const char* call) const {
    if (slot == nullptr) unsupported(call);
    return slot;
  }

  // Marks the plugin as initialized, so the destructor calls shutdown.
  void set_initialized() { initialized_ = true; }

 private:
  [[noreturn]] void unsupported(const char* call) const;

  std::shared_ptr<void> library_;
  H2_PluginApi api_;
  std::string name_;
  bool initialized_ = false;
};

// The logger callback passed to every plugin at initialize; `user_data` is the PluginHandle.
void plugin_log_callback(void* user_data, H2_LogLevel level, const char* message);

}  // namespace h2::detail
