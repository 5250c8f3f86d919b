// CUDA device memory as a dma-buf (mem_export_dmabuf, ABI 1.7), through the driver API's
// cuMemGetHandleForAddressRange. The plugin links the static CUDA runtime only, so the driver's
// entry points are looked up at run time (cudaGetDriverEntryPointByVersion): a driver without them
// (before CUDA 11.7) makes the export unsupported, not the plugin unloadable.
#pragma once

#include <cstddef>
#include <cstdint>

namespace h2::cuda {

// Whether `device` can export its memory as a dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, and the
// driver has the entry points). Never throws.
bool dmabuf_supported(int device);

// The whole host pages that hold [ptr, ptr + bytes) as a dma-buf; writes `ptr`'s offset within them.
// Throws PluginError: INVALID_ARGUMENT unless the range lies inside one allocation of `device`,
// UNSUPPORTED (with the driver's reason) when the driver cannot export it.
int export_dmabuf(int device, const void* ptr, size_t bytes, uint64_t& offset_within);

}  // namespace h2::cuda
