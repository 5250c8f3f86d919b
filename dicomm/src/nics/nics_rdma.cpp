// rdma-core's view of the node: every verbs device, each of its ports' state, link layer, speed,
// and the IP interface (netdev) the port belongs to.
#include <infiniband/verbs.h>

#include <cerrno>
#include <filesystem>
#include <memory>

#include "common/errno_text.hpp"
#include "nics_internal.hpp"

namespace h2::dicomm::detail {

namespace {

namespace fs = std::filesystem;

const fs::path kInfinibandClass = "/sys/class/infiniband";

// rdma-core ≥ 48 adds active_speed_ex (XDR and later do not fit the 8-bit active_speed) and fills
// it through ibv_query_port's extended path, leaving active_speed 0. Debian 12's rdma-core 44 has
// no such field, so it is read only where the header declares it.
template <typename PortAttr>
uint32_t speed_encoding(const PortAttr& attr) {
  if constexpr (requires { attr.active_speed_ex; }) {
    if (attr.active_speed_ex != 0) return attr.active_speed_ex;
  }
  return attr.active_speed;
}

// The netdev of a port. RoCE ports name it in the GID table's attributes; InfiniBand ports have
// none there, and their IPoIB interface is a child of the same PCI device: with one per port, the
// interface whose dev_port (0-based) is the port's.
std::string port_netdev(const std::string& device, int port) {
  const fs::path port_dir = kInfinibandClass / device / "ports" / std::to_string(port);
  if (std::string ndev = read_sysfs_line((port_dir / "gid_attrs" / "ndevs" / "0").string()); !ndev.empty()) return ndev;
  std::error_code error;
  std::vector<std::string> children;
  for (const auto& entry : fs::directory_iterator(kInfinibandClass / device / "device" / "net", error))
    children.push_back(entry.path().filename().string());
  if (children.size() == 1) return children.front();
  for (const std::string& child : children)
    if (sysfs_number(read_sysfs_line((kInfinibandClass / device / "device" / "net" / child / "dev_port").string())) ==
        port - 1)
      return child;
  return {};
}

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};

void append(std::string& status, const std::string& problem) {
  status += (status.empty() ? "" : "; ") + problem;
}

}  // namespace

std::vector<Nic> discover_rdma_ports(std::string& status) {
  status.clear();
  int count = 0;
  errno = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&count));
  if (!list) {
    // A kernel without RDMA (CONFIG_INFINIBAND off, no uverbs) answers ENOSYS: "Function not implemented".
    status = "ibv_get_device_list: " + (errno != 0 ? errno_text(errno) : std::string("failed"));
    return {};
  }
  if (count == 0) {
    status = "ibv_get_device_list: no RDMA devices";
    return {};
  }

  std::vector<Nic> ports;
  for (int i = 0; i < count; ++i) {
    ibv_device* device = list.get()[i];
    const std::string name = ibv_get_device_name(device);
    errno = 0;
    std::unique_ptr<ibv_context, ContextDeleter> context(ibv_open_device(device));
    if (!context) {
      append(status, name + ": ibv_open_device: " + errno_text(errno != 0 ? errno : ENODEV));
      continue;
    }
    ibv_device_attr device_attr{};
    if (const int rc = ibv_query_device(context.get(), &device_attr); rc != 0) {
      append(status, name + ": ibv_query_device: " + errno_text(rc));
      continue;
    }
    for (int port = 1; port <= device_attr.phys_port_cnt; ++port) {
      ibv_port_attr port_attr{};
      if (const int rc = ibv_query_port(context.get(), static_cast<uint8_t>(port), &port_attr); rc != 0) {
        append(status, name + "/" + std::to_string(port) + ": ibv_query_port: " + errno_text(rc));
        continue;
      }
      Nic nic;
      nic.name = name + "/" + std::to_string(port);
      nic.rdma = true;
      nic.link_layer = rdma_link_layer(port_attr.link_layer, device->transport_type);
      nic.up = port_attr.state == IBV_PORT_ACTIVE || port_attr.state == IBV_PORT_ACTIVE_DEFER;
      nic.speed_gbps = ib_port_gbps(speed_encoding(port_attr), port_attr.active_width);
      nic.netdev = port_netdev(name, port);
      ports.push_back(std::move(nic));
    }
  }
  return ports;
}

}  // namespace h2::dicomm::detail
