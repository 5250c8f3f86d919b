// The plugin's one piece of global state: the Runtime between initialize and shutdown.
#pragma once

#include <memory>

#include "runtime.hpp"

namespace h2::cpu_reference {

// The live runtime; throws PluginError when the plugin is not initialized.
Runtime& runtime();
// initialize and shutdown set and clear it.
std::unique_ptr<Runtime>& runtime_slot();

// The shadow-view address of [ptr, ptr + bytes) of whichever device holds it; throws PluginError
// naming `role` when it is NULL, not this plugin's device memory, or not inside one live allocation.
void* resolve_device(const void* ptr, size_t bytes, const char* role);

}  // namespace h2::cpu_reference
