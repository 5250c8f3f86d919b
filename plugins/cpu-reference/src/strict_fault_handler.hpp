// Strict mode's diagnostic: when host code dereferences a cpu-reference device pointer, the access
// faults (the device view is PROT_NONE). This SIGSEGV handler names the cause on stderr and then
// lets the fault proceed to the previous handler, so the process still stops where the bug is.
#pragma once

#include <cstddef>

namespace h2::cpu_reference {

// Registers [begin, begin + bytes) as device `device`'s address range. Installs the handler on first
// use. Thread-safe; ranges stay registered until unregister_device_range.
void register_device_range(const void* begin, size_t bytes, int device);
void unregister_device_range(const void* begin);

}  // namespace h2::cpu_reference
