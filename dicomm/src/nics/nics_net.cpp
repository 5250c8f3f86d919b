// The kernel's IP interfaces: getifaddrs for the interfaces of this network namespace, their flags
// and addresses; /sys/class/net for what getifaddrs does not say (operstate, speed, hardware type).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <memory>

#include "nics_internal.hpp"

namespace h2::dicomm::detail {

namespace {

struct IfaddrsDeleter {
  void operator()(ifaddrs* list) const { freeifaddrs(list); }
};

std::string address_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = address->sa_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return inet_ntop(address->sa_family, raw, text, sizeof text) != nullptr ? text : "";
}

struct Interface {
  unsigned flags = 0;  // getifaddrs's: the kernel's dev_get_flags, IFF_RUNNING included
  std::vector<std::string> addresses;
};

}  // namespace

std::vector<Nic> discover_interfaces() {
  // getifaddrs asks the kernel over netlink, so it lists the interfaces of the caller's network
  // namespace even where /sys was mounted in another; an AF_PACKET entry exists for every
  // interface, with or without an address.
  std::map<std::string, Interface> found;
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return {};
  const std::unique_ptr<ifaddrs, IfaddrsDeleter> list(raw);
  for (const ifaddrs* entry = raw; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_name == nullptr) continue;
    // IPv4 aliases come as "eth0:1" (legacy address labels); their addresses are eth0's.
    const std::string name(entry->ifa_name);
    Interface& interface = found[name.substr(0, name.find(':'))];
    interface.flags |= entry->ifa_flags;
    if (entry->ifa_addr == nullptr) continue;
    const int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    std::string text = address_text(entry->ifa_addr);
    if (!text.empty() &&
        std::find(interface.addresses.begin(), interface.addresses.end(), text) == interface.addresses.end())
      interface.addresses.push_back(std::move(text));
  }

  std::vector<std::pair<unsigned, Nic>> indexed;
  for (auto& [name, interface] : found) {
    const std::string sys = "/sys/class/net/" + name + "/";
    Nic nic;
    nic.name = name;
    nic.up = interface_up(read_sysfs_line(sys + "operstate"), interface.flags);
    nic.link_layer = interface_link_layer(sysfs_number(read_sysfs_line(sys + "type")), interface.flags);
    nic.speed_gbps = nic.link_layer == LinkLayer::loopback ? 0 : sysfs_speed_gbps(read_sysfs_line(sys + "speed"));
    nic.addresses = std::move(interface.addresses);
    indexed.emplace_back(if_nametoindex(name.c_str()), std::move(nic));
  }
  std::sort(indexed.begin(), indexed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Nic> nics;
  for (auto& [index, nic] : indexed) nics.push_back(std::move(nic));
  return nics;
}

}  // namespace h2::dicomm::detail
