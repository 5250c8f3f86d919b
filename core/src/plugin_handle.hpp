// A loaded, initialized plugin: the library, core-owned copies of its API and operator tables, the
// operators' capabilities per device, and the checks the C++ API makes on every call through it.
// Shared by every Device, buffer, stream, event and tensor of the plugin; the plugin is shut down and
// unloaded when the last of them goes away.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "caching_allocator.hpp"
#include "h2/error.hpp"
#include "h2/plugin_abi.h"

namespace h2::detail {

class PluginHandle {
 public:
  // `library` keeps the shared object loaded (an opaque owner: only plugin_loader.cpp knows its type).
  // `ops` is all NULL when the plugin has no operator table.
  // `collectives` is all NULL when the plugin has no collective table.
  PluginHandle(std::shared_ptr<void> library, const H2_PluginApi& api, const H2_OpTable& ops,
               const H2_CollectiveTable& collectives, std::string name);
  ~PluginHandle();  // shutdown, then unload
  PluginHandle(const PluginHandle&) = delete;
  PluginHandle& operator=(const PluginHandle&) = delete;

  const std::string& name() const { return name_; }
  // The tables with every slot the plugin's struct_size does not cover set to NULL.
  const H2_PluginApi& api() const { return api_; }
  const H2_OpTable& ops() const { return ops_; }
  const H2_CollectiveTable& collectives() const { return collectives_; }
  bool has_collectives() const { return collectives_.struct_size != 0; }

  // Asks the plugin for every operator's capability on each device (once, at load).
  void query_capabilities(int device_count);
  // True when the operator table has a slot for `op`.
  bool has_op_slot(H2_Op op) const;
  // The capability of `op` on `device`; struct_size 0 when the plugin does not provide it.
  const H2_OpCapability& capability(int device, H2_Op op) const;

  // Throws h2::Error "NAME: what: <status>: <plugin message>" unless `status` is H2_STATUS_OK.
  // Inline, so the success path of every call costs one comparison.
  void check(H2_Status status, std::string_view what) const {
    if (status != H2_STATUS_OK) fail(status, what);
  }
  // Throws h2::Error(H2_STATUS_UNSUPPORTED) when an optional slot is NULL.
  template <typename Slot>
  Slot require(Slot slot, const char* call) const {
    if (slot == nullptr) unsupported(call);
    return slot;
  }

  // Makes each device's caching allocator, caching unless H2_ALLOCATOR=plugin (throws h2::Error for
  // another value).
  void make_allocators(int device_count);
  // The caching allocator of `device` (a device index the plugin reported).
  CachingAllocator& allocator(int device) const { return *allocators_[static_cast<size_t>(device)]; }

  // Marks the plugin as initialized, so the destructor calls shutdown.
  void set_initialized() { initialized_ = true; }

 private:
  [[noreturn]] void fail(H2_Status status, std::string_view what) const;
  [[noreturn]] void unsupported(const char* call) const;

  std::shared_ptr<void> library_;
  H2_PluginApi api_;
  H2_OpTable ops_;
  H2_CollectiveTable collectives_;
  std::string name_;
  bool initialized_ = false;
  // capabilities_[device][op]; index 0 unused.
  std::vector<std::array<H2_OpCapability, H2_OP_COUNT + 1>> capabilities_;
  // Declared last, so they give their cached memory back before anything else of the plugin goes.
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
};

// The logger callback passed to every plugin at initialize; `user_data` is the PluginHandle.
void plugin_log_callback(void* user_data, H2_LogLevel level, const char* message);

}  // namespace h2::detail
