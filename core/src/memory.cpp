#include "h2/memory.hpp"

#include "plugin_handle.hpp"

namespace h2 {

MemoryStats memory_stats(const Device& device) {
  return device.plugin()->allocator(device.index()).stats();
}

void empty_cache(const Device& device) {
  device.plugin()->allocator(device.index()).empty_cache();
}

void reset_peak_memory_stats(const Device& device) {
  device.plugin()->allocator(device.index()).reset_peak();
}

}  // namespace h2
