#include "plugin_state.hpp"

#include "common.hpp"

namespace h2::cpu_reference {

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> slot;
  return slot;
}

Runtime& runtime() {
  if (!runtime_slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is not initialized");
  return *runtime_slot();
}

void* resolve_device(const void* ptr, size_t bytes, const char* role) {
  require(ptr, role);
  DeviceMemory* memory = runtime().owner_of(ptr);
  if (memory == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " is not device memory of this plugin");
  return memory->resolve(ptr, bytes, role);
}

}  // namespace h2::cpu_reference
