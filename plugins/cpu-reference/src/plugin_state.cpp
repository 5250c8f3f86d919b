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

}  // namespace h2::cpu_reference
