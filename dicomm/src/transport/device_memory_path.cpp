// What libfabric, as DiComm uses it, can register: the reasons a device's memory is staged.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "h2/dicomm/data_paths.hpp"

namespace h2::dicomm {

DeviceMemoryPath device_memory_path(const DeviceProperties& properties) {
  // Host memory the host may dereference is ordinary process memory to libfabric (FI_HMEM_SYSTEM).
  if (properties.nic_direct_host && properties.host_accessible)
    return {true, "device-direct: its memory is host memory, which the NIC registers as it is"};
  const uint32_t version = fi_version();
  const std::string libfabric =
      "libfabric " + std::to_string(FI_MAJOR(version)) + "." + std::to_string(FI_MINOR(version));
  if (properties.nic_direct_cuda || properties.nic_direct_dmabuf) {
    // CUDA memory needs FI_HMEM registration with a device iface, which Debian's libfabric 1.17 is
    // built without ("Hmem iface FI_HMEM_CUDA not supported"); a dma-buf needs FI_MR_DMABUF, which
    // came with libfabric 1.20, and DiComm does not register with it yet.
    std::string reasons;
    if (properties.nic_direct_cuda)
      reasons = "as CUDA memory, but " + libfabric + " here registers no device memory (no FI_HMEM device interface)";
    if (properties.nic_direct_dmabuf) {
#ifdef FI_MR_DMABUF
      const std::string dmabuf = "this libfabric has FI_MR_DMABUF, but DiComm does not register dma-bufs yet";
#else
      const std::string dmabuf = "FI_MR_DMABUF needs libfabric 1.20 (built against " +
                                 std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION) + ")";
#endif
      reasons += (reasons.empty() ? "" : "; ") + std::string("as dma-bufs (mem_export_dmabuf), but ") + dmabuf;
    }
    return {false, "staged through pinned host memory: the plugin offers its memory to NICs " + reasons};
  }
  if (!properties.host_accessible)
    return {false, "staged through pinned host memory: the plugin offers no NIC access to its device memory"};
  return {false, "staged through pinned host memory: the plugin does not let NICs register its memory"};
}

}  // namespace h2::dicomm
