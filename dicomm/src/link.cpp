#include "link.hpp"

namespace h2::dicomm::detail {

bool nic_can_access(const DeviceProperties& properties) {
  // Host memory the host may dereference is ordinary process memory to libfabric (FI_HMEM_SYSTEM).
  // CUDA and dma-buf memory would need FI_HMEM or ibv_reg_dmabuf_mr, which Debian's libfabric 1.17
  // lacks (notes/dicomm.md §2.1), so such devices are staged.
  return properties.nic_direct_host && properties.host_accessible;
}

Link::Link(const Device& device, size_t piece_bytes, bool force_staging)
    : device_(device),
      direct_(!force_staging && nic_can_access(device.properties())),
      piece_bytes_(piece_bytes),
      stream_(device.create_stream()) {}

std::unique_ptr<StagingSlot> Link::acquire() {
  if (!free_.empty()) {
    std::unique_ptr<StagingSlot> slot = std::move(free_.back());
    free_.pop_back();
    return slot;
  }
  if (allocated_ >= kMaxSlots) return nullptr;
  ++allocated_;
  auto slot = std::make_unique<StagingSlot>();
  slot->buffer = device_.allocate_pinned_host(piece_bytes_);
  return slot;
}

void Link::release(std::unique_ptr<StagingSlot> slot) {
  slot->copied.reset();
  free_.push_back(std::move(slot));
}

}  // namespace h2::dicomm::detail
