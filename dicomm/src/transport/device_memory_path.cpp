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
    // CUDA and dma-buf memory need FI_HMEM registration (fi_mr_regattr with a device iface) or a
    // dma-buf one. Debian's libfabric 1.17 has the FI_HMEM API but is built without any device
    // iface ("Hmem iface FI_HMEM_CUDA not supported"), and FI_MR_DMABUF came with 1.20.
#ifdef FI_MR_DMABUF
    const std::string dmabuf = "; this libfabric has FI_MR_DMABUF, which DiComm does not register with yet";
#else
    const std::string dmabuf = "; FI_MR_DMABUF needs libfabric 1.20 (built against " +
                               std::to_string(FI_MAJOR_VERSION) + "." + std::to_string(FI_MINOR_VERSION) + ")";
#endif
    return {false, std::string("staged through pinned host memory: the plugin offers its memory to NICs as ") +
                       (properties.nic_direct_cuda && properties.nic_direct_dmabuf
                            ? "CUDA memory and as dma-bufs (mem_export_dmabuf)"
                        : properties.nic_direct_cuda ? "CUDA memory"
                                                     : "dma-bufs (mem_export_dmabuf)") +
                       ", but " + libfabric + " here registers no device memory (no FI_HMEM device interface)" +
                       dmabuf};
  }
  if (!properties.host_accessible)
    return {false, "staged through pinned host memory: the plugin offers no NIC access to its device memory"};
  return {false, "staged through pinned host memory: the plugin does not let NICs register its memory"};
}

}  // namespace h2::dicomm
