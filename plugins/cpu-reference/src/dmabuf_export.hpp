// Device memory as a dma-buf (mem_export_dmabuf, ABI 1.7), through the kernel's udmabuf driver:
// it turns pages of a sealed memfd (the arena's) into a dma-buf a NIC can register, as a GPU driver
// does for its own memory. Where /dev/udmabuf is missing (the module is not loaded, a container
// without the device) the export fails saying so.
#pragma once

#include <cstddef>
#include <string>

namespace h2::cpu_reference {

// Whether this process can create dma-bufs here (/dev/udmabuf opens for writing).
bool udmabuf_available();

// A dma-buf of the memfd's bytes [offset, offset + bytes), both multiples of the page size; the
// descriptor is the caller's. Throws PluginError(UNSUPPORTED) saying why it cannot.
int create_udmabuf(int memfd, size_t offset, size_t bytes);

}  // namespace h2::cpu_reference
