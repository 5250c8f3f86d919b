// The plugin's one piece of global state: the Runtime between initialize and shutdown.
#pragma once

#include <memory>

#include "runtime.hpp"

namespace h2::cpu_reference {

// The live runtime; throws PluginError when the plugin is not initialized.
Runtime& runtime();
// initialize and shutdown set and clear it.
std::unique_ptr<Runtime>& runtime_slot();

}  // namespace h2::cpu_reference
