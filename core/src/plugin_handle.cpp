#include "plugin_handle.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "h2/log.hpp"

namespace h2::detail {

PluginHandle::PluginHandle(std::shared_ptr<void> library, const H2_PluginApi& api, const H2_OpTable& ops,
                           const H2_CollectiveTable& collectives, std::string name)
    : library_(std::move(library)), api_(api), ops_(ops), collectives_(collectives), name_(std::move(name)) {}

void PluginHandle::query_capabilities(int device_count) {
  capabilities_.assign(static_cast<size_t>(device_count), {});
  for (int device = 0; device < device_count; ++device) {
    for (uint32_t op = 1; op <= H2_OP_COUNT; ++op) {
      H2_OpCapability capability;
      std::memset(&capability, 0, sizeof capability);
      capability.struct_size = sizeof capability;
      H2_Status status = ops_.capability(device, op, &capability);
      if (status == H2_STATUS_UNSUPPORTED) {
        capability.struct_size = 0;
      } else {
        check(status, "capability(device " + std::to_string(device) + ", op " + std::to_string(op) + ")");
      }
      capabilities_[static_cast<size_t>(device)][op] = capability;
    }
  }
}

bool PluginHandle::has_op_slot(H2_Op op) const {
  // The operator slots follow H2_Op's order from gemm on (plugin_abi.h asserts it for every one).
  if (op < H2_OP_GEMM || op > H2_OP_COUNT) return false;
  void* slot = nullptr;
  std::memcpy(&slot,
              reinterpret_cast<const char*>(&ops_) + offsetof(H2_OpTable, gemm) + (op - H2_OP_GEMM) * sizeof(void*),
              sizeof slot);
  return slot != nullptr;
}

const H2_OpCapability& PluginHandle::capability(int device, H2_Op op) const {
  static const H2_OpCapability none{};
  const auto index = static_cast<size_t>(op);
  if (device < 0 || static_cast<size_t>(device) >= capabilities_.size() || index == 0 || index > H2_OP_COUNT)
    return none;
  return capabilities_[static_cast<size_t>(device)][index];
}

void PluginHandle::make_allocators(int device_count) {
  const char* choice = std::getenv("H2_ALLOCATOR");
  const std::string mode = choice != nullptr ? choice : "";
  if (!mode.empty() && mode != "caching" && mode != "plugin")
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "H2_ALLOCATOR='" + mode + "' is not an allocator: use 'caching' (the default) or 'plugin'");
  allocators_.clear();
  for (int device = 0; device < device_count; ++device)
    allocators_.push_back(std::make_unique<CachingAllocator>(*this, device, mode != "plugin"));
}

PluginHandle::~PluginHandle() {
  allocators_.clear();  // cached segments go back through mem_free while the plugin still runs
  if (!initialized_) return;
  H2_Status status = api_.shutdown();
  if (status != H2_STATUS_OK) log(LogLevel::warning, name_, std::string("shutdown failed: ") + api_.last_error());
}

void PluginHandle::fail(H2_Status status, std::string_view what) const {
  const char* message = api_.last_error();
  std::string text = name_ + ": " + std::string(what) + ": " + status_name(status);
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
