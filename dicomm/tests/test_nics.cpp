// NIC discovery on the machine the test runs on (whatever it has: the loopback always, RDMA rarely),
// and the decoding rules it applies to what rdma-core, the kernel and libfabric report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "h2/dicomm/data_paths.hpp"
#include "h2/dicomm/nics.hpp"
#include "nics/nics_internal.hpp"

namespace {

using h2::dicomm::discover_nics;
using h2::dicomm::LinkLayer;
using h2::dicomm::Nic;
using h2::dicomm::NicDiscovery;
using testing::Contains;
using testing::HasSubstr;
using testing::MatchesRegex;
namespace detail = h2::dicomm::detail;

const NicDiscovery& discovery() {
  static const NicDiscovery found = discover_nics();
  return found;
}

const Nic* find_nic(const std::string& name) {
  const auto& nics = discovery().nics;
  const auto it = std::find_if(nics.begin(), nics.end(), [&](const Nic& n) { return n.name == name; });
  return it == nics.end() ? nullptr : &*it;
}

TEST(Discovery, FindsTheLoopbackUpWithItsAddress) {
  const auto& nics = discovery().nics;
  const auto lo =
      std::find_if(nics.begin(), nics.end(), [](const Nic& n) { return n.link_layer == LinkLayer::loopback; });
  ASSERT_NE(lo, nics.end()) << "no loopback interface among " << nics.size() << " NICs";
  EXPECT_EQ(lo->name, "lo");
  EXPECT_TRUE(lo->up);
  EXPECT_FALSE(lo->rdma);
  EXPECT_THAT(lo->addresses, Contains("127.0.0.1"));
  EXPECT_EQ(lo->speed_gbps, 0) << "a loopback has no line rate";
}

TEST(Discovery, ListsEveryInterfaceOfTheKernel) {
  // /sys/class/net is this namespace's when the test runs as usual (ip netns exec remounts it too).
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net")) {
    const std::string name = entry.path().filename().string();
    const Nic* nic = find_nic(name);
    ASSERT_NE(nic, nullptr) << name << " is missing";
    EXPECT_FALSE(nic->rdma);
    EXPECT_GE(nic->speed_gbps, 0);
  }
}

TEST(Discovery, SaysWhyThereIsNoRdmaDevice) {
  const NicDiscovery& d = discovery();
  const bool any_rdma = std::any_of(d.nics.begin(), d.nics.end(), [](const Nic& n) { return n.rdma; });
  if (!any_rdma) {
    EXPECT_THAT(d.rdma_status, HasSubstr("ibv_get_device_list")) << "no RDMA port, and no reason given";
    return;
  }
  for (const Nic& nic : d.nics) {  // a machine with RDMA: ports are named device/port
    if (!nic.rdma) continue;
    EXPECT_THAT(nic.name, MatchesRegex(".+/[0-9]+"));
    EXPECT_NE(nic.link_layer, LinkLayer::loopback);
    if (!nic.netdev.empty() && std::filesystem::exists("/sys/class/net/" + nic.netdev)) {
      EXPECT_NE(find_nic(nic.netdev), nullptr) << nic.name << "'s netdev " << nic.netdev << " is not listed";
    }
  }
}

TEST(Discovery, LibfabricOffersTcpAndShmForReliableDatagrams) {
  const NicDiscovery& d = discovery();
  EXPECT_THAT(d.libfabric_version, MatchesRegex("[0-9]+\\.[0-9]+"));
  EXPECT_EQ(d.libfabric_status, "");
  EXPECT_THAT(d.providers, Contains("shm"));
  EXPECT_TRUE(std::any_of(d.providers.begin(), d.providers.end(), [](const std::string& p) {
    return p.starts_with("tcp");
  })) << testing::PrintToString(d.providers);
  // Socket providers name their domains after interfaces, so the loopback carries a tcp provider.
  const Nic* lo = find_nic("lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(std::any_of(lo->providers.begin(), lo->providers.end(), [](const std::string& p) {
    return p.starts_with("tcp");
  })) << testing::PrintToString(lo->providers);
  // shm's domain is "shm", which is no NIC.
  for (const Nic& nic : d.nics) EXPECT_THAT(nic.providers, testing::Not(Contains("shm"))) << nic.name;
}

TEST(IbSpeed, LaneRatesFollowTheSpecEncodings) {
  EXPECT_EQ(detail::ib_lane_gbps(1), 2.5);
  EXPECT_EQ(detail::ib_lane_gbps(2), 5);
  EXPECT_EQ(detail::ib_lane_gbps(4), 10);
  EXPECT_EQ(detail::ib_lane_gbps(8), 10);
  EXPECT_EQ(detail::ib_lane_gbps(16), 14);
  EXPECT_EQ(detail::ib_lane_gbps(32), 25);
  EXPECT_EQ(detail::ib_lane_gbps(64), 50);
  EXPECT_EQ(detail::ib_lane_gbps(128), 100);
  EXPECT_EQ(detail::ib_lane_gbps(256), 200);
  for (uint32_t unknown : {0u, 3u, 5u, 512u}) EXPECT_EQ(detail::ib_lane_gbps(unknown), 0) << unknown;
}

TEST(IbSpeed, WidthsAndPortRates) {
  EXPECT_EQ(detail::ib_width_lanes(1), 1);
  EXPECT_EQ(detail::ib_width_lanes(2), 4);
  EXPECT_EQ(detail::ib_width_lanes(4), 8);
  EXPECT_EQ(detail::ib_width_lanes(8), 12);
  EXPECT_EQ(detail::ib_width_lanes(16), 2);
  EXPECT_EQ(detail::ib_width_lanes(3), 0);
  EXPECT_EQ(detail::ib_port_gbps(2, 1), 5);       // DDR 1x
  EXPECT_EQ(detail::ib_port_gbps(4, 2), 40);      // QDR 4x
  EXPECT_EQ(detail::ib_port_gbps(16, 2), 56);     // FDR 4x
  EXPECT_EQ(detail::ib_port_gbps(32, 2), 100);    // EDR 4x
  EXPECT_EQ(detail::ib_port_gbps(32, 1), 25);     // EDR 1x (a RoCE 25 GbE port reports this)
  EXPECT_EQ(detail::ib_port_gbps(64, 2), 200);    // HDR 4x
  EXPECT_EQ(detail::ib_port_gbps(128, 2), 400);   // NDR 4x
  EXPECT_EQ(detail::ib_port_gbps(128, 16), 200);  // NDR 2x (split port)
  EXPECT_EQ(detail::ib_port_gbps(256, 2), 800);   // XDR 4x
  EXPECT_EQ(detail::ib_port_gbps(32, 8), 300);    // EDR 12x
  EXPECT_EQ(detail::ib_port_gbps(0, 2), 0);
  EXPECT_EQ(detail::ib_port_gbps(64, 0), 0);
}

TEST(RdmaLinkLayer, EthernetIsRoceUnderIbTransportAndPlainUnderIwarp) {
  EXPECT_EQ(detail::rdma_link_layer(IBV_LINK_LAYER_INFINIBAND, IBV_TRANSPORT_IB), LinkLayer::infiniband);
  EXPECT_EQ(detail::rdma_link_layer(IBV_LINK_LAYER_ETHERNET, IBV_TRANSPORT_IB), LinkLayer::roce);
  EXPECT_EQ(detail::rdma_link_layer(IBV_LINK_LAYER_ETHERNET, IBV_TRANSPORT_IWARP), LinkLayer::ethernet);
  EXPECT_EQ(detail::rdma_link_layer(IBV_LINK_LAYER_UNSPECIFIED, IBV_TRANSPORT_IB), LinkLayer::infiniband);
  EXPECT_EQ(detail::rdma_link_layer(IBV_LINK_LAYER_UNSPECIFIED, IBV_TRANSPORT_IWARP), LinkLayer::unknown);
  EXPECT_EQ(detail::rdma_link_layer(42, IBV_TRANSPORT_IB), LinkLayer::unknown);
}

TEST(SysfsParsing, SpeedIsMegabitsAndUnknownIsZero) {
  EXPECT_EQ(detail::sysfs_speed_gbps("25000\n"), 25);
  EXPECT_EQ(detail::sysfs_speed_gbps("100000"), 100);
  EXPECT_EQ(detail::sysfs_speed_gbps("10000"), 10);
  EXPECT_EQ(detail::sysfs_speed_gbps("2500"), 2.5);
  EXPECT_EQ(detail::sysfs_speed_gbps("-1\n"), 0);  // SPEED_UNKNOWN (no carrier, virtio)
  EXPECT_EQ(detail::sysfs_speed_gbps(""), 0);      // the read failed (EINVAL for lo, down links)
  EXPECT_EQ(detail::sysfs_speed_gbps("65535"), 0);
  EXPECT_EQ(detail::sysfs_speed_gbps("4294967295"), 0);
  EXPECT_EQ(detail::sysfs_speed_gbps("fast"), 0);
  EXPECT_EQ(detail::sysfs_speed_gbps("100 Mb/s"), 0);
}

TEST(SysfsParsing, NumbersInDecimalAndHex) {
  EXPECT_EQ(detail::sysfs_number("0x1003\n"), 0x1003);
  EXPECT_EQ(detail::sysfs_number("772"), 772);
  EXPECT_EQ(detail::sysfs_number(" 1 "), 1);
  EXPECT_EQ(detail::sysfs_number(""), -1);
  EXPECT_EQ(detail::sysfs_number("0x"), -1);
  EXPECT_EQ(detail::sysfs_number("12ab"), -1);
}

TEST(SysfsParsing, UpMeansOperstateUpOrUnknownButRunning) {
  EXPECT_TRUE(detail::interface_up("up\n", 0));
  EXPECT_TRUE(detail::interface_up("unknown", IFF_UP | IFF_RUNNING | IFF_LOOPBACK));  // the loopback
  EXPECT_TRUE(detail::interface_up("", IFF_UP | IFF_RUNNING));                        // no sysfs entry
  EXPECT_FALSE(detail::interface_up("unknown", IFF_UP));                              // no carrier
  EXPECT_FALSE(detail::interface_up("down", IFF_UP | IFF_RUNNING));
  EXPECT_FALSE(detail::interface_up("dormant", IFF_UP));
  EXPECT_FALSE(detail::interface_up("lowerlayerdown", IFF_UP));
}

TEST(SysfsParsing, LinkLayerFromHardwareTypeAndFlags) {
  EXPECT_EQ(detail::interface_link_layer(772, 0), LinkLayer::loopback);  // ARPHRD_LOOPBACK
  EXPECT_EQ(detail::interface_link_layer(-1, IFF_LOOPBACK), LinkLayer::loopback);
  EXPECT_EQ(detail::interface_link_layer(1, 0), LinkLayer::ethernet);     // ARPHRD_ETHER
  EXPECT_EQ(detail::interface_link_layer(32, 0), LinkLayer::infiniband);  // ARPHRD_INFINIBAND: IPoIB
  EXPECT_EQ(detail::interface_link_layer(65534, 0), LinkLayer::unknown);  // ARPHRD_NONE: tun, wireguard
  EXPECT_EQ(detail::interface_link_layer(-1, 0), LinkLayer::unknown);
}

TEST(Providers, DomainsNameInterfacesExactlyAndRdmaPortsByDevice) {
  Nic port;
  port.name = "mlx5_0/1";
  port.rdma = true;
  Nic eth;
  eth.name = "eth0";
  EXPECT_TRUE(detail::domain_names_nic(port, "mlx5_0"));
  EXPECT_TRUE(detail::domain_names_nic(port, "mlx5_0-xrc"));
  EXPECT_FALSE(detail::domain_names_nic(port, "mlx5_01"));
  EXPECT_FALSE(detail::domain_names_nic(port, "mlx5_1"));
  EXPECT_FALSE(detail::domain_names_nic(port, "mlx5_0/1"));
  EXPECT_TRUE(detail::domain_names_nic(eth, "eth0"));
  EXPECT_FALSE(detail::domain_names_nic(eth, "eth0-x"));
  EXPECT_FALSE(detail::domain_names_nic(eth, "eth"));

  Nic port2 = port;
  port2.name = "mlx5_0/2";
  std::vector<Nic> nics{port, port2, eth};
  detail::attach_provider(nics, "mlx5_0", "verbs;ofi_rxm");
  detail::attach_provider(nics, "mlx5_0-dgram", "verbs;ofi_rxm");
  detail::attach_provider(nics, "eth0", "tcp;ofi_rxm");
  detail::attach_provider(nics, "shm", "shm");
  EXPECT_EQ(nics[0].providers, std::vector<std::string>{"verbs;ofi_rxm"});
  EXPECT_EQ(nics[1].providers, std::vector<std::string>{"verbs;ofi_rxm"});
  EXPECT_EQ(nics[2].providers, std::vector<std::string>{"tcp;ofi_rxm"});
}

TEST(LinkLayerName, NamesEveryLayer) {
  EXPECT_STREQ(h2::dicomm::link_layer_name(LinkLayer::infiniband), "InfiniBand");
  EXPECT_STREQ(h2::dicomm::link_layer_name(LinkLayer::roce), "RoCE");
  EXPECT_STREQ(h2::dicomm::link_layer_name(LinkLayer::ethernet), "Ethernet");
  EXPECT_STREQ(h2::dicomm::link_layer_name(LinkLayer::loopback), "loopback");
  EXPECT_STREQ(h2::dicomm::link_layer_name(LinkLayer::unknown), "unknown");
}

// Why a plugin's memory is staged: the properties a CUDA-like, a host-memory and a closed device report.
TEST(DeviceMemoryPath, HostMemoryGoesDirectDeviceMemoryIsStagedAndSaysWhy) {
  h2::DeviceProperties host;
  host.nic_direct_host = true;
  host.host_accessible = true;
  EXPECT_TRUE(h2::dicomm::device_memory_path(host).direct);

  h2::DeviceProperties cuda;
  cuda.nic_direct_host = true;
  cuda.nic_direct_cuda = true;
  cuda.host_accessible = false;
  const auto staged = h2::dicomm::device_memory_path(cuda);
  EXPECT_FALSE(staged.direct);
  EXPECT_THAT(staged.why, HasSubstr("staged through pinned host memory"));
  EXPECT_THAT(staged.why, HasSubstr("as CUDA memory"));
  EXPECT_THAT(staged.why, HasSubstr("no FI_HMEM device interface"));
  // A plugin that exports dma-bufs (ABI 1.7) is told what the dma-buf path lacks, not the CUDA one.
  h2::DeviceProperties dmabuf;
  dmabuf.nic_direct_dmabuf = true;
  const std::string why = h2::dicomm::device_memory_path(dmabuf).why;
  EXPECT_THAT(why, HasSubstr("as dma-bufs (mem_export_dmabuf), but "));
  EXPECT_THAT(why, HasSubstr("FI_MR_DMABUF"));
  EXPECT_THAT(why, testing::Not(HasSubstr("FI_HMEM device interface")));

  h2::DeviceProperties closed;
  EXPECT_THAT(h2::dicomm::device_memory_path(closed).why, HasSubstr("offers no NIC access to its device memory"));
}

}  // namespace
