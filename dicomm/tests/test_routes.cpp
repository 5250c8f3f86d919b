// Which network a pair of ranks uses (routes.hpp): the rules alone, on networks described here, so
// that InfiniBand and Ethernet islands are tested where this machine has neither. The two-island
// namespace test (islands.sh) runs the same choice on real interfaces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "collectives/islands.hpp"
#include "h2/dicomm/error.hpp"
#include "transport/routes.hpp"

namespace h2::dicomm::detail {
namespace {

using testing::HasSubstr;

Network net(std::string provider, std::string fabric, std::string domain, double gbps = 0) {
  Network n;
  n.provider = std::move(provider);
  n.fabric = std::move(fabric);
  n.domain = std::move(domain);
  n.gbps = gbps;
  return n;
}

Network loopback(std::string provider = "tcp;ofi_rxm") {
  Network n = net(std::move(provider), "127.0.0.1/32", "lo");
  n.loopback = true;
  return n;
}

// The network `a` uses to `b`, described from a's side ("" where they share none), after checking
// that b picks the same one.
std::string route(const RankNetworks& a, const RankNetworks& b, const RouteRules& rules = {}) {
  const auto [mine, theirs] = choose_route(a, b, rules);
  const auto [their_view, my_view] = choose_route(b, a, rules);
  EXPECT_EQ(mine, my_view) << "the two ends chose differently";
  EXPECT_EQ(theirs, their_view) << "the two ends chose differently";
  if (mine < 0) return "";
  EXPECT_EQ(a.networks[mine].provider, b.networks[theirs].provider);
  return a.networks[mine].describe() + " " + a.networks[mine].fabric;
}

TEST(Routes, IslandsUseTheirFastNetworkInsideAndTheBackboneBetween) {
  // Two hosts per island; every host also sits on a slow backbone that joins the islands.
  const Network backbone = net("tcp;ofi_rxm", "198.18.9.0/24", "slow0", 1);
  const RankNetworks a1{"a1", {backbone, net("tcp;ofi_rxm", "198.18.1.0/24", "fast0", 100), loopback()}};
  const RankNetworks a2{"a2", {net("tcp;ofi_rxm", "198.18.1.0/24", "fast0", 100), backbone, loopback()}};
  const RankNetworks b1{"b1", {backbone, net("tcp;ofi_rxm", "198.18.2.0/24", "fast0", 100), loopback()}};
  EXPECT_EQ(route(a1, a2), "tcp;ofi_rxm on fast0 198.18.1.0/24");
  EXPECT_EQ(route(a1, b1), "tcp;ofi_rxm on slow0 198.18.9.0/24");
  EXPECT_EQ(route(a2, b1), "tcp;ofi_rxm on slow0 198.18.9.0/24");
}

// Islands are the ranks joined by links faster than the slowest: the two-island hosts, numbered
// across the islands (a1 b1 a2 b2), and ranks of one node, which the node transport joins.
TEST(Islands, GroupRanksByLinksFasterThanTheSlowest) {
  const Network backbone = net("tcp;ofi_rxm", "198.18.9.0/24", "slow0", 1);
  const std::vector<RankNetworks> ranks = {
      {"a1", {backbone, net("tcp;ofi_rxm", "198.18.1.0/24", "fast0", 100)}},
      {"b1", {backbone, net("tcp;ofi_rxm", "198.18.2.0/24", "fast0", 100)}},
      {"a2", {backbone, net("tcp;ofi_rxm", "198.18.1.0/24", "fast0", 100)}},
      {"b2", {backbone, net("tcp;ofi_rxm", "198.18.2.0/24", "fast0", 100)}},
      {"a2", {backbone}},  // a second rank on a2's node
  };
  EXPECT_EQ(link_gbps(ranks[0], ranks[2], {}), 100);
  EXPECT_EQ(link_gbps(ranks[0], ranks[1], {}), 1);
  EXPECT_EQ(link_gbps(ranks[2], ranks[4], {}), std::numeric_limits<double>::infinity());
  const auto gbps = [&](int a, int b) { return link_gbps(ranks[a], ranks[b], {}); };
  using Islands = std::vector<std::vector<int>>;
  EXPECT_EQ(islands(4, gbps), (Islands{{0, 2}, {1, 3}}));
  EXPECT_EQ(islands(5, gbps), (Islands{{0, 2, 4}, {1, 3}}));
  EXPECT_EQ(islands(3, [](int, int) { return 10.0; }), (Islands{{0, 1, 2}}));  // alike: one island
  EXPECT_EQ(islands(3, [](int, int) { return 0.0; }), (Islands{{0, 1, 2}}));   // unknown: one
  // Links less than twice as fast as the slowest make no islands (a hierarchy would cost more
  // steps than it saves); a link of unknown speed leaves only nodes told apart.
  EXPECT_EQ(islands(4, [](int a, int b) { return a / 2 == b / 2 ? 150.0 : 100.0; }), (Islands{{0, 1, 2, 3}}));
  EXPECT_EQ(islands(4, [](int a, int b) { return a / 2 == b / 2 ? 200.0 : 100.0; }), (Islands{{0, 1}, {2, 3}}));
  EXPECT_EQ(islands(4, [](int a, int b) { return a / 2 == b / 2 ? 200.0 : 0.0; }), (Islands{{0, 1, 2, 3}}));
  // Nodes of two ranks whose NICs report no speed: the node transport makes each node an island.
  EXPECT_EQ(islands(6, [](int a, int b) { return a / 2 == b / 2 ? std::numeric_limits<double>::infinity() : 0.0; }),
            (Islands{{0, 1}, {2, 3}, {4, 5}}));
}

TEST(Islands, HalvingDoublingFollowsOnlyConsecutivePowerOfTwoBlocks) {
  using Islands = std::vector<std::vector<int>>;
  EXPECT_TRUE(halving_doubling_follows(Islands{{0, 1}, {2, 3}}, 4));
  EXPECT_TRUE(halving_doubling_follows(Islands{{0, 1, 2, 3}, {4, 5, 6, 7}}, 8));
  EXPECT_FALSE(halving_doubling_follows(Islands{{0, 2}, {1, 3}}, 4));        // numbered across the islands
  EXPECT_FALSE(halving_doubling_follows(Islands{{0, 1, 2}, {3, 4, 5}}, 6));  // not a power of two
  EXPECT_FALSE(halving_doubling_follows(Islands{{0, 1, 2}, {3}}, 4));        // islands of two sizes
  EXPECT_TRUE(worth_a_hierarchy(Islands{{0, 2}, {1, 3}}, false));
  EXPECT_FALSE(worth_a_hierarchy(Islands{{0, 1, 2, 3}}, true));
  EXPECT_FALSE(worth_a_hierarchy(Islands{{0}, {1}, {2}}, true));
  // Islands of several sizes only when asked for (H2_DICOMM_ALLREDUCE=hierarchical).
  EXPECT_FALSE(worth_a_hierarchy(Islands{{0, 2}, {1}}, false));
  EXPECT_TRUE(worth_a_hierarchy(Islands{{0, 2}, {1}}, true));
}

// Whom each rank meets between the groups: its place in every group where they are one size, else
// the first ranks (for a first rank only).
TEST(Islands, EachRankMeetsItsPlaceInEveryGroupOrTheFirstRanks) {
  const std::vector<std::vector<int>> equal = {{0, 2}, {1, 3}}, unequal = {{0, 2}, {1}};
  const GroupPlace three = place_in(equal, 3);
  EXPECT_EQ(three.group, 1u);
  EXPECT_EQ(three.rank, 1);
  EXPECT_TRUE(three.equal);
  EXPECT_EQ(three.across, (std::vector<int>{2, 3}));
  const GroupPlace two = place_in(unequal, 2), one = place_in(unequal, 1);
  EXPECT_FALSE(two.equal);
  EXPECT_TRUE(two.across.empty());
  EXPECT_EQ(one.across, (std::vector<int>{0, 1}));
  EXPECT_EQ(one.across_index, 0u);
}

// Groups of several sizes sum a piece of the tensor between the ranks whose shards hold it: groups
// of 4 and 2 (and 3) cut at 0, 1/4, 1/3, 1/2, 2/3 and 3/4; groups of one size m give m pieces, piece i
// held by every group's rank i; sizes whose least common multiple is too large give none.
TEST(Islands, GroupsOfSeveralSizesSumPiecesBetweenTheirHolders) {
  const ShardPieces two_sizes = shard_pieces({{0, 1, 2, 3}, {4, 5}}, 4096);
  EXPECT_EQ(two_sizes.unit, 4);
  ASSERT_EQ(two_sizes.pieces.size(), 4u);
  EXPECT_EQ(two_sizes.pieces[1].begin, 1);
  EXPECT_EQ(two_sizes.pieces[1].end, 2);
  EXPECT_EQ(two_sizes.pieces[1].holders, (std::vector<int>{1, 4}));
  EXPECT_EQ(two_sizes.pieces[3].holders, (std::vector<int>{3, 5}));
  const ShardPieces three_sizes = shard_pieces({{0, 1, 2, 3}, {4, 5}, {6, 7, 8}}, 4096);
  EXPECT_EQ(three_sizes.unit, 12);
  std::vector<int64_t> begins;
  for (const ShardPiece& piece : three_sizes.pieces) begins.push_back(piece.begin);
  EXPECT_EQ(begins, (std::vector<int64_t>{0, 3, 4, 6, 8, 9}));
  EXPECT_EQ(three_sizes.pieces[2].holders, (std::vector<int>{1, 4, 7}));  // [4, 6) of 12
  EXPECT_EQ(three_sizes.pieces.back().end, 12);
  const ShardPieces one_size = shard_pieces({{0, 2}, {1, 3}}, 4096);
  ASSERT_EQ(one_size.pieces.size(), 2u);
  EXPECT_EQ(one_size.pieces[1].holders, (std::vector<int>{2, 3}));
  EXPECT_EQ(shard_pieces({{0, 1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11}, {12, 13, 14}}, 64).unit, 0);  // 105 > 64
}

// Groups {0, 2, 4} and {1, 3} exchanging blocks of 5: the first group's three places each hold
// their own block and 10/3 of the outside blocks (of ranks 1 and 3), 4, 3 and 3 elements, so the
// segments are 5 + 4 long; the second group's places hold 15/2 of blocks 0, 2 and 4 each. Every
// outside element is in exactly one slice, each piece inside one block.
TEST(Islands, BlocksOverGroupsOfSeveralSizesAreCutIntoSlicesOfOutsideBlocks) {
  const std::vector<std::vector<int>> groups = {{0, 2, 4}, {1, 3}};
  const BlockLayout three = block_layout(groups, 0, 5);
  EXPECT_EQ(three.segment, 9);
  ASSERT_EQ(three.slices.size(), 3u);
  ASSERT_EQ(three.slices[1].size(), 2u);  // elements [4, 7) of blocks 1 then 3
  EXPECT_EQ(three.slices[1][0].owner, 1);
  EXPECT_EQ(three.slices[1][0].in_block, 4);
  EXPECT_EQ(three.slices[1][0].length, 1);
  EXPECT_EQ(three.slices[1][1].owner, 3);
  EXPECT_EQ(three.slices[1][1].in_block, 0);
  EXPECT_EQ(three.slices[1][1].in_slice, 1);
  EXPECT_EQ(three.slices[1][1].length, 2);
  for (size_t g = 0; g < groups.size(); ++g) {
    const BlockLayout layout = block_layout(groups, g, 5);
    std::map<int, std::vector<int>> covered;  // owner -> how often each element of its block is held
    for (const auto& slice : layout.slices) {
      int64_t length = 0;
      for (const OutsidePiece& piece : slice) {
        EXPECT_EQ(piece.in_slice, length);
        length += piece.length;
        covered[piece.owner].resize(5);
        for (int64_t e = piece.in_block; e < piece.in_block + piece.length; ++e) ++covered[piece.owner][e];
      }
      EXPECT_LE(5 + length, layout.segment);
    }
    EXPECT_EQ(covered.size(), groups[1 - g].size());
    for (const auto& [owner, counts] : covered) EXPECT_EQ(counts, std::vector<int>(5, 1)) << "block " << owner;
  }
  EXPECT_EQ(block_layout(groups, 1, 5).segment, 5 + 8);
  EXPECT_EQ(block_layout(groups, 1, 0).segment, 0);  // empty blocks: nothing to hold
}

TEST(Routes, AnRdmaIslandUsesVerbsWhateverTheEthernetSpeed) {
  // Holmes' cluster: InfiniBand inside an island, a faster-looking Ethernet everywhere.
  const Network ib = net("verbs;ofi_rxm", "IB-0xfe80000000000000", "mlx5_0", 200);
  const Network ethernet = net("tcp;ofi_rxm", "10.0.0.0/16", "eth0", 400);
  const RankNetworks a{"a", {ethernet, ib}}, b{"b", {ib, ethernet}}, c{"c", {ethernet}};
  EXPECT_EQ(route(a, b), "verbs;ofi_rxm on mlx5_0 IB-0xfe80000000000000");
  EXPECT_EQ(route(a, c), "tcp;ofi_rxm on eth0 10.0.0.0/16");
}

TEST(Routes, ShmAndLoopbackStayInsideANode) {
  const Network shm = net("shm", "shm", "shm");
  const Network ethernet = net("tcp;ofi_rxm", "10.0.0.0/16", "eth0", 25);
  const RankNetworks a{"n1", {ethernet, loopback(), shm}}, b{"n1", {shm, ethernet, loopback()}};
  const RankNetworks c{"n2", {shm, loopback(), ethernet}};
  EXPECT_EQ(route(a, b), "shm shm");
  // Where shm would hang (libfabric before 1.19 without cross-memory attach), the loopback.
  EXPECT_EQ(route(a, b, {"", false}), "tcp;ofi_rxm on lo 127.0.0.1/32");
  // Another node shares the names "shm" and "127.0.0.1/32" and reaches neither.
  EXPECT_EQ(route(a, c), "tcp;ofi_rxm on eth0 10.0.0.0/16");
  const RankNetworks only_local{"n3", {shm, loopback()}};
  EXPECT_EQ(route(a, only_local), "");
}

TEST(Routes, TiesGoToTheStoresNetworkThenIpv4ThenTheSmallerName) {
  Network v6 = net("tcp;ofi_rxm", "fd00::/64", "eth0", 10);
  Network v4 = net("tcp;ofi_rxm", "192.0.2.0/24", "eth0", 10);
  Network other = net("tcp;ofi_rxm", "10.9.0.0/24", "eth1", 10);
  const Network link_local = net("tcp;ofi_rxm", "fe80::/64", "eth0", 100);
  EXPECT_EQ(route({"a", {v6, v4, link_local}}, {"b", {link_local, v4, v6}}), "tcp;ofi_rxm on eth0 192.0.2.0/24");
  EXPECT_EQ(route({"a", {v4, other}}, {"b", {other, v4}}), "tcp;ofi_rxm on eth1 10.9.0.0/24");
  v4.reaches_store = true;
  EXPECT_EQ(route({"a", {v4, other}}, {"b", {other, v4}}), "tcp;ofi_rxm on eth0 192.0.2.0/24");
  // Only where both ends reach the store through it.
  Network v4_elsewhere = v4;
  v4_elsewhere.reaches_store = false;
  EXPECT_EQ(route({"a", {v4, other}}, {"b", {other, v4_elsewhere}}), "tcp;ofi_rxm on eth1 10.9.0.0/24");
  // The slower end's NIC decides: 100 and 1 is 1.
  EXPECT_EQ(route({"a", {net("tcp;ofi_rxm", "10.1.0.0/24", "x", 100), other}},
                  {"b", {net("tcp;ofi_rxm", "10.1.0.0/24", "y", 1), other}}),
            "tcp;ofi_rxm on eth1 10.9.0.0/24");
}

TEST(Routes, EveryChoiceIsTheSameFromBothEnds) {
  const std::vector<Network> pool = {net("tcp;ofi_rxm", "10.1.0.0/24", "e1", 10),
                                     net("tcp;ofi_rxm", "10.2.0.0/24", "e2", 100),
                                     net("tcp;ofi_rxm", "fd00::/64", "e1", 10),
                                     net("verbs;ofi_rxm", "IB-0x1", "mlx5_0", 200),
                                     net("tcp", "10.1.0.0/24", "e1", 10),
                                     net("shm", "shm", "shm"),
                                     loopback(),
                                     net("efa", "efa", "rdmap0", 100)};
  std::mt19937 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    RankNetworks a{random() % 2 ? "n1" : "n2", {}}, b{random() % 2 ? "n1" : "n2", {}};
    for (const Network& n : pool) {
      if (random() % 2) a.networks.push_back(n);
      if (random() % 2) {
        b.networks.push_back(n);
        b.networks.back().gbps = n.gbps * (1 + static_cast<double>(random() % 3));
        b.networks.back().reaches_store = random() % 2;
      }
    }
    std::shuffle(a.networks.begin(), a.networks.end(), random);
    route(a, b, {"", random() % 2 == 0});  // checks both ends agree
  }
}

TEST(Routes, ARequestedProviderIsTheOnlyOneAndAPairWithoutANetworkIsNamed) {
  const Network verbs = net("verbs;ofi_rxm", "IB-0x1", "mlx5_0", 200);
  const Network ethernet = net("tcp;ofi_rxm", "10.0.0.0/16", "eth0", 25);
  const std::vector<RankNetworks> ranks = {{"a", {verbs, ethernet}}, {"b", {ethernet, verbs}}, {"c", {verbs}}};
  const std::vector<int> routes = choose_routes({ranks[0], ranks[1]}, 0, {"tcp;ofi_rxm", true}, {});
  EXPECT_EQ(routes, (std::vector<int>{-1, 1}));
  // Rank 2 has no tcp;ofi_rxm: the message names both ranks, their nodes and what each has.
  try {
    choose_routes(ranks, 0, {"tcp;ofi_rxm", true}, {});
    ADD_FAILURE() << "no error for rank 2";
  } catch (const CommError&) {
  }
  try {
    choose_routes(ranks, 2, {"tcp;ofi_rxm", true}, {});
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    EXPECT_EQ(e.peer(), 0);
    EXPECT_THAT(e.what(), HasSubstr("rank 2 (c) and rank 0 (a) share no network of provider 'tcp;ofi_rxm'"));
    EXPECT_THAT(e.what(), HasSubstr("rank 2 has verbs;ofi_rxm on mlx5_0 (IB-0x1)"));
  }
  // Peers the node transport carries need no network.
  EXPECT_EQ(choose_routes(ranks, 2, {"tcp;ofi_rxm", true}, {true, true, false}), (std::vector<int>{-1, -1, -1}));
}

TEST(Routes, DisconnectedRdmaIslandsOfOneNameAreToldApartByTheirLabels) {
  // Both islands' InfiniBand fabrics carry the default subnet prefix: alike by name only.
  const Network ib = net("verbs;ofi_rxm", "IB-0xfe80000000000000", "mlx5_0", 200);
  const Network ethernet = net("tcp;ofi_rxm", "10.0.0.0/16", "eth0", 25);
  RankNetworks a{"a", {ib, ethernet}, "island-a"}, b{"b", {ib, ethernet}, "island-b"};
  EXPECT_EQ(route(a, b), "tcp;ofi_rxm on eth0 10.0.0.0/16");
  b.island = "island-a";
  EXPECT_EQ(route(a, b), "verbs;ofi_rxm on mlx5_0 IB-0xfe80000000000000");
}

TEST(Routes, NodesOnRoutedSubnetsUseTheNetworksTheyReachTheStoreThrough) {
  // One /24 per rack: no fabric name in common, yet each reaches the store, so each other.
  Network rack1 = net("tcp;ofi_rxm", "10.1.1.0/24", "eth0", 100),
          rack2 = net("tcp;ofi_rxm", "10.1.2.0/24", "ens3", 100);
  Network v6a = net("tcp;ofi_rxm", "fd00:1::/64", "eth0", 100), v6b = net("tcp;ofi_rxm", "fd00:2::/64", "ens3", 100);
  const Network docker = net("tcp;ofi_rxm", "172.17.0.0/16", "docker0", 0);
  for (Network* n : {&rack1, &rack2, &v6a, &v6b}) n->reaches_store = true;
  // Docker's bridge has one name on every host and reaches none: the store's network, faster, wins.
  EXPECT_EQ(route({"a", {v6a, rack1, docker}}, {"b", {docker, rack2, v6b}}), "tcp;ofi_rxm on eth0 10.1.1.0/24");
  EXPECT_EQ(route({"a", {v6a, rack1}}, {"b", {v6b, rack2}}), "tcp;ofi_rxm on eth0 10.1.1.0/24");
  rack2.reaches_store = false;
  EXPECT_EQ(route({"a", {rack1}}, {"b", {rack2}}), "");
}

TEST(Routes, ARequestedProviderThatDiCommDoesNotRankIsStillUsed) {
  const Network sockets = net("sockets", "10.0.0.0/16", "eth0", 25);
  EXPECT_EQ(route({"a", {sockets}}, {"b", {sockets}}), "");
  EXPECT_EQ(route({"a", {sockets}}, {"b", {sockets}}, {"sockets", true}), "sockets on eth0 10.0.0.0/16");
}

TEST(Routes, NicSpeedsAreParsedAndBadEntriesNamed) {
  EXPECT_EQ(parse_nic_speeds("fast0=100,slow0=0.5"), (std::map<std::string, double>{{"fast0", 100}, {"slow0", 0.5}}));
  EXPECT_TRUE(parse_nic_speeds("").empty());
  for (const char* bad : {"fast0", "fast0=", "=5", "fast0=x", "fast0=-1", "fast0=0", "a=1,,b=2", "a=1,"}) {
    try {
      parse_nic_speeds(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const CommError& e) {
      EXPECT_THAT(e.what(), HasSubstr("H2_DICOMM_NIC_GBPS entry"));
    }
  }
}

}  // namespace
}  // namespace h2::dicomm::detail
