// Which links the cost model charges, and how many devices share them: each case is a fault the model
// once had, worked out by hand (pipeline hops that stay in a node, NIC shares at a hop, NIC kinds of
// equal line rate, hierarchical data-parallel sums, links between sites, gradients in 16 bits and sums
// that overlap).
#include <gtest/gtest.h>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {
namespace {

using nlohmann::json;

// Consumer GPUs: two nodes of 8 over PCIe (128 Gbit/s), one 100 Gbit/s RDMA NIC each (achieving its
// line rate, device-direct), and a third node with a slower PCIe switch.
json consumer_cluster(const std::string& nic_kind = "infiniband", double nic_efficiency = 1) {
  json cluster = json::parse(R"({
    "name": "consumer",
    "device_types": [{"name": "gpu", "vendor": "V", "peak_tflops": {"bf16": 160}, "memory_gib": 24,
                      "efficiency": 0.5, "runtime_overhead_gib": 1}],
    "nic_types": [{"name": "nic", "type": "ethernet", "bandwidth_gbps": 100, "latency_us": 10}],
    "nodes": [
      {"name": "a", "device_type": "gpu", "count": 2, "devices_per_node": 8, "intra_node_bandwidth_gbps": 128,
       "intra_node_latency_us": 3, "nic": "nic", "nics_per_node": 1},
      {"name": "b", "device_type": "gpu", "count": 1, "devices_per_node": 8, "intra_node_bandwidth_gbps": 64,
       "intra_node_latency_us": 3, "nic": "nic", "nics_per_node": 1}
    ],
    "device_direct_rdma": [["V", "V"]]
  })");
  cluster["nic_types"][0]["type"] = nic_kind;
  cluster["nic_types"][0]["efficiency"] = nic_efficiency;
  return cluster;
}

json model_16_layers() {
  return json::parse(R"({"name": "m", "layers": 16, "hidden": 1024, "ffn": 4096, "heads": 16, "seq_len": 1024,
                         "vocab": 32000, "global_batch": 64, "micro_batch_sizes": [1], "dtype": "bf16"})");
}

struct Planner {
  explicit Planner(const json& cluster_json, GradientSettings gradients = {})
      : canonical(canonicalize(parse_cluster(cluster_json))),
        model(parse_model(model_16_layers())),
        evaluator(canonical, model, Schedule::one_f_one_b, gradients) {}
  // Stage k of a partitioned class: one layer each (the model's 16 over the stages, the rest on the last).
  PartitionedClass partitioned(const ClassLayout& layout) const {
    PartitionedClass c{layout, evaluator.stage_specs(layout)};
    for (StageSpec& s : c.stages) s.layers = model.layers / static_cast<int>(c.stages.size());
    c.stages.back().layers += model.layers % static_cast<int>(c.stages.size());
    return c;
  }
  double bytes() const { return evaluator.cost().boundary_bytes(1); }
  double nic_time(double gbps) const { return 10e-6 + bytes() * 8 / (gbps * 1e9); }
  double intra_time(double gbps) const { return 3e-6 + bytes() * 8 / (gbps * 1e9); }

  CanonicalCluster canonical;
  Model model;
  Evaluator evaluator;
};

// A 16-stage pipeline over group a's two nodes: 14 hops stay inside a node (PCIe), one crosses with
// one sender per node, which has the NIC to itself. The model once charged all 15 hops an eighth of
// the NIC.
TEST(Links, OnlyTheHopThatLeavesANodeUsesTheNicAndItHasItWhole) {
  Planner s(consumer_cluster());
  const PartitionedClass c = s.partitioned({{{0, 1, 16}}, 1});
  const PipelineTimes times = s.evaluator.pipeline_times(c, 1);
  ASSERT_EQ(times.transfer.size(), 15u);
  for (size_t k = 0; k < 15; ++k)
    EXPECT_DOUBLE_EQ(times.transfer[k], k == 7 ? s.nic_time(100) : s.intra_time(128)) << "hop " << k;
}

// Eight replicas of a two-stage pipeline from group a (one stage each on a device) to group b: each
// of a's nodes sends at the a -> b hop from its eight devices at once, so each gets an eighth of its
// NIC; b's node receives from eight too.
TEST(Links, DevicesCrossingAtTheSameHopShareTheirNodesNic) {
  Planner s(consumer_cluster());
  const Evaluator::Hop hop = s.evaluator.hop({{{0, 1, 2}, {1, 1, 1}}, 8}, 0, 1);
  EXPECT_FALSE(hop.same_node);
  EXPECT_EQ(hop.senders, 4);  // a replica's two a-stages: its second sends; four replicas per node
  EXPECT_EQ(hop.receivers, 8);
  const PartitionedClass c = s.partitioned({{{0, 1, 2}, {1, 1, 1}}, 8});
  const PipelineTimes times = s.evaluator.pipeline_times(c, 1);
  ASSERT_EQ(times.transfer.size(), 2u);
  EXPECT_DOUBLE_EQ(times.transfer[0], s.intra_time(128));
  EXPECT_DOUBLE_EQ(times.transfer[1], s.nic_time(100.0 / 8));  // b's eight receivers
}

// Tensor-parallel stages of 4 over a node of 8: the hop from stage 1 to stage 2 leaves the node, and
// all four ranks of the stage send at once.
TEST(Links, TensorParallelRanksCrossTogether) {
  Planner s(consumer_cluster());
  const Evaluator::Hop inside = s.evaluator.hop({{{0, 4, 4}}, 1}, 0, 0);
  EXPECT_TRUE(inside.same_node);
  const Evaluator::Hop across = s.evaluator.hop({{{0, 4, 4}}, 1}, 0, 1);
  EXPECT_FALSE(across.same_node);
  EXPECT_EQ(across.senders, 4);
  EXPECT_EQ(across.receivers, 4);
}

// hop() works out even layouts from their sizes; every hop of every such layout here must match
// dealing the devices out one by one: replica r's stage k of a segment on devices r x D + k x tp.
TEST(Links, HopsOfEvenLayoutsMatchDealingTheDevicesOut) {
  Planner s(consumer_cluster());
  const int per_node = 8;
  for (int tp_a : {1, 2, 4, 8})
    for (int stages_a : {1, 2, 3, 4})
      for (int tp_b : {1, 2, 8})
        for (int stages_b : {1, 2})
          for (int replicas : {1, 2, 3}) {
            const ClassLayout layout{{{0, tp_a, stages_a}, {1, tp_b, stages_b}}, replicas};
            const auto node = [&](size_t segment, int r, int k) {
              const Segment& g = layout.segments[segment];
              return (int64_t{r} * g.devices() + int64_t{k} * g.tp) / per_node;
            };
            for (size_t segment = 0; segment < 2; ++segment)
              for (int k = 0; k < layout.segments[segment].stages; ++k) {
                if (segment == 1 && k + 1 == stages_b) break;
                const bool within = k + 1 < layout.segments[segment].stages;
                const size_t next = within ? segment : segment + 1;
                const int k_next = within ? k + 1 : 0;
                const auto crosses = [&](int r) { return !within || node(segment, r, k) != node(next, r, k_next); };
                Evaluator::Hop expected;
                for (int r = 0; r < replicas; ++r) {
                  if (!crosses(r)) continue;
                  expected.same_node = false;
                  int senders = 0, receivers = 0;
                  for (int q = 0; q < replicas; ++q) {
                    if (!crosses(q)) continue;
                    if (node(segment, q, k) == node(segment, r, k)) senders += layout.segments[segment].tp;
                    if (node(next, q, k_next) == node(next, r, k_next)) receivers += layout.segments[next].tp;
                  }
                  expected.senders = std::max(expected.senders, senders);
                  expected.receivers = std::max(expected.receivers, receivers);
                }
                const Evaluator::Hop hop = s.evaluator.hop(layout, segment, k);
                const std::string where = "tp " + std::to_string(tp_a) + "x" + std::to_string(stages_a) + " -> tp " +
                                          std::to_string(tp_b) + "x" + std::to_string(stages_b) + ", " +
                                          std::to_string(replicas) + " replicas, segment " + std::to_string(segment) +
                                          " hop " + std::to_string(k);
                EXPECT_EQ(hop.same_node, expected.same_node) << where;
                if (!expected.same_node) {
                  EXPECT_EQ(hop.senders, expected.senders) << where;
                  EXPECT_EQ(hop.receivers, expected.receivers) << where;
                }
              }
          }
}

// DeepSpeed's pipeline engine (to predict published runs): each tensor-parallel rank sends 1/tp of
// the activation, the receivers gather it inside their node, and the sender waits the transfer out.
TEST(Links, DeepSpeedCutsSendsOverTensorParallelRanksAndBlocks) {
  Planner s(consumer_cluster());
  const Evaluator deepspeed(s.canonical, s.model, Schedule::one_f_one_b, {}, PipelineRuntime::deepspeed);
  const PartitionedClass c = s.partitioned({{{0, 4, 4}}, 1});  // the hop after stage 1 leaves the node
  const PipelineTimes heteropp = s.evaluator.pipeline_times(c, 1), cut = deepspeed.pipeline_times(c, 1);
  EXPECT_FALSE(heteropp.blocking_sends);
  EXPECT_TRUE(cut.blocking_sends);
  const Link nic = s.evaluator.cost().link_between(c.stages[1], c.stages[2], false, 4, 4);
  const double gather = s.evaluator.cost().allreduce_time(
                            s.evaluator.cost().intra_node_link(s.canonical.cluster.nodes[0]), s.bytes(), 4) /
                        2;
  EXPECT_DOUBLE_EQ(heteropp.transfer[1], s.evaluator.cost().transfer_time(nic, s.bytes()));
  EXPECT_DOUBLE_EQ(cut.transfer[1], s.evaluator.cost().transfer_time(nic, s.bytes() / 4) + gather);
}

// Group a's 16 devices as 2 replicas of an 8-stage pipeline: dealt out replica by replica (HeteroAuto)
// each replica fills a node and no hop leaves it; stage by stage (Megatron's and DeepSpeed's rank
// order) a node holds four stages' replicas, and every fourth hop leaves it from both replicas at once.
TEST(Links, StageMajorPlacementPutsAStagesReplicasSideBySide) {
  Planner s(consumer_cluster());
  ClassLayout layout{{{0, 1, 8}}, 2};
  for (int k = 0; k < 7; ++k) EXPECT_TRUE(s.evaluator.hop(layout, 0, k).same_node) << k;
  EXPECT_EQ(s.evaluator.replicas_per_node(layout, 0), 1);
  layout.stage_major = true;
  EXPECT_EQ(s.evaluator.replicas_per_node(layout, 0), 2);
  for (int k = 0; k < 7; ++k) {
    const Evaluator::Hop hop = s.evaluator.hop(layout, 0, k);
    EXPECT_EQ(hop.same_node, k != 3) << k;
    if (k == 3) {
      EXPECT_EQ(hop.senders, 2);
    }
  }
}

// InfiniBand and RoCE of one line rate do not train alike: by default each kind achieves its own
// fraction of the line rate, and a description may say what its NICs achieve.
TEST(Links, NicKindsOfEqualLineRateAchieveDifferentBandwidths) {
  const Cluster ib = parse_cluster(consumer_cluster("infiniband"));
  json roce_json = consumer_cluster("roce");
  roce_json["nic_types"][0].erase("efficiency");
  const Cluster roce = parse_cluster(roce_json);
  json ib_default_json = consumer_cluster("infiniband");
  ib_default_json["nic_types"][0].erase("efficiency");
  const Cluster ib_default = parse_cluster(ib_default_json);
  EXPECT_DOUBLE_EQ(ib.nics[0].efficiency, 1);
  EXPECT_DOUBLE_EQ(ib_default.nics[0].efficiency, default_nic_efficiency(NicKind::infiniband));
  EXPECT_DOUBLE_EQ(roce.nics[0].efficiency, default_nic_efficiency(NicKind::roce));
  EXPECT_GT(default_nic_efficiency(NicKind::infiniband), default_nic_efficiency(NicKind::roce));
  EXPECT_GT(default_nic_efficiency(NicKind::roce), default_nic_efficiency(NicKind::ethernet));
  const Model model = parse_model(model_16_layers());
  const CostModel on_ib(ib_default, model), on_roce(roce, model);
  constexpr auto p2p = CostModel::Traffic::point_to_point;
  EXPECT_LT(on_ib.nic_link(ib_default.nodes[0], 1, p2p).bandwidth_gbps, 100);
  EXPECT_GT(on_ib.nic_link(ib_default.nodes[0], 1, p2p).bandwidth_gbps,
            on_roce.nic_link(roce.nodes[0], 1, p2p).bandwidth_gbps);
  json bad = consumer_cluster();
  bad["nic_types"][0]["efficiency"] = 1.5;
  EXPECT_THROW(parse_cluster(bad), DescriptionError);
}

// Sixteen replicas of a one-stage pipeline on group a's two nodes: the gradients are summed among
// each node's 8 replicas over PCIe and across the two nodes on an eighth of the bytes each, every
// device of a node sharing its NIC, the two at once (a pipelined ring). A flat ring charged all of
// the bytes to the NIC share.
TEST(Links, DataParallelSumsAreHierarchicalWhereReplicasShareANode) {
  Planner s(consumer_cluster());
  const PartitionedClass c = s.partitioned({{{0, 1, 1}}, 16});
  const CostModel& cost = s.evaluator.cost();
  const double bytes = 4 * (16 * cost.layer_parameters() + 2 * cost.embedding_parameters());
  const Link intra{128, 3, false, 0};
  const Link nic{100.0 / 8, 10, false, 0};
  EXPECT_DOUBLE_EQ(s.evaluator.dp_allreduce_time({c}),
                   std::max(cost.allreduce_time(intra, bytes, 8), cost.allreduce_time(nic, bytes / 8, 2)));
  EXPECT_LT(s.evaluator.dp_allreduce_time({c}), cost.allreduce_time(nic, bytes, 16) / 4);
}

// H2's runtime stages every pipeline send of accelerator memory (DiComm's libfabric registers none)
// while a vendor's collective library may sum gradients device-direct: the description says each
// apart, and the model charges the staging (device -> host -> device over the 200 Gbit/s host link)
// to the traffic it says is staged and to no other. One fact for both once charged the pipeline of
// `h2-1024` as device-direct, which DiComm cannot do.
TEST(Links, PipelineSendsAndGradientSumsAreStagedByTheirOwnFacts) {
  json sends_staged = consumer_cluster();
  sends_staged["device_direct_rdma"] = json::array();
  sends_staged["device_direct_collectives"] = json::array({"V"});
  json sums_staged = consumer_cluster();
  sums_staged["device_direct_collectives"] = json::array();
  const Planner h2_like(sends_staged), sums_apart(sums_staged), both(consumer_cluster());
  const double staging = 2 * both.bytes() * 8 / 200e9;
  const ClassLayout pipeline{{{0, 1, 16}}, 1};
  const double hop = both.evaluator.pipeline_times(both.partitioned(pipeline), 1).transfer[7];
  EXPECT_DOUBLE_EQ(hop, both.nic_time(100));
  EXPECT_DOUBLE_EQ(h2_like.evaluator.pipeline_times(h2_like.partitioned(pipeline), 1).transfer[7], hop + staging);
  EXPECT_DOUBLE_EQ(sums_apart.evaluator.pipeline_times(sums_apart.partitioned(pipeline), 1).transfer[7], hop);

  // Two replicas of an 8-stage pipeline, one per node: each stage's sum crosses the NICs only.
  const ClassLayout replicas{{{0, 1, 8}}, 2};
  const double sum = both.evaluator.dp_allreduce_time({both.partitioned(replicas)});
  EXPECT_DOUBLE_EQ(h2_like.evaluator.dp_allreduce_time({h2_like.partitioned(replicas)}), sum);
  EXPECT_GT(sums_apart.evaluator.dp_allreduce_time({sums_apart.partitioned(replicas)}), sum);
}

// Between two vendors the pair's fact counts, not each vendor's own: vendors V and W whose pair is
// device-direct but neither with itself (a runtime with one library across both). The hop from a
// (V) to b (W) was charged staging from V's own fact.
TEST(Links, AHopBetweenTwoVendorsGoesByThePairsFact) {
  json cluster = consumer_cluster();
  json other = cluster["device_types"][0];
  other["name"] = "gpu-w";
  other["vendor"] = "W";
  cluster["device_types"].push_back(other);
  cluster["nodes"][1]["device_type"] = "gpu-w";
  cluster["device_direct_rdma"] = json::array({json::array({"V", "W"})});
  const Planner s(cluster);
  const ClassLayout across{{{0, 1, 1}, {1, 1, 1}}, 1};
  EXPECT_DOUBLE_EQ(s.evaluator.pipeline_times(s.partitioned(across), 1).transfer[0], s.nic_time(100));
  cluster["device_direct_rdma"] = json::array();
  const Planner staged(cluster);
  EXPECT_DOUBLE_EQ(staged.evaluator.pipeline_times(staged.partitioned(across), 1).transfer[0],
                   s.nic_time(100) + 2 * s.bytes() * 8 / 200e9);
}

// Two classes, one per group, each of 8 one-stage replicas: the gradients are summed inside each
// group over its own links, then only a group's shard (an eighth) crosses between the groups; or one
// flat ring over all 16 passes every node's NIC once per ring, whichever is faster. A ring over every
// replica at the slowest NIC share charged all of the bytes to it.
TEST(Links, SumsAcrossGroupsCarryOnlyEachGroupsShardOrRunOneFlatRing) {
  Planner s(consumer_cluster());
  PartitionedClass on_a = s.partitioned({{{0, 1, 1}}, 8});
  PartitionedClass on_b = s.partitioned({{{1, 1, 1}}, 8});
  const CostModel& cost = s.evaluator.cost();
  const double bytes = 4 * (16 * cost.layer_parameters() + 2 * cost.embedding_parameters());
  // a: 8 replicas, one device each, 8 to a node; b: 8 in its one node.
  const double inside_a = cost.allreduce_time({128, 3, false, 0}, bytes, 8);
  const double inside_b = cost.allreduce_time({64, 3, false, 0}, bytes, 8);
  const double across = cost.allreduce_time({100.0 / 8, 10, false, 200}, bytes / 8, 2);
  // The flat ring: one ring per node (its 8 devices are consecutive in it), so the NIC whole.
  const double flat =
      std::max({cost.allreduce_time({128, 3, false, 0}, bytes, 16), cost.allreduce_time({64, 3, false, 0}, bytes, 16),
                cost.allreduce_time({100, 10, false, 200}, bytes, 16)});
  const std::vector<std::vector<double>> sums = s.evaluator.dp_allreduce_times({on_a, on_b});
  EXPECT_DOUBLE_EQ(sums[0][0], std::min(std::max(inside_a, inside_b) + across, flat));
  EXPECT_DOUBLE_EQ(sums[1][0], sums[0][0]);
  EXPECT_LT(sums[0][0], cost.allreduce_time({100.0 / 8, 10, false, 200}, bytes, 16) / 4);
}

// Group b in a second site, 10 Gbit/s away: the link between the sites is one link, shared by every
// device crossing it at once. The model once gave each device the link's whole bandwidth, as if
// each had its own (Sailor's consumer-GPU cluster: eight ranks of a stage sending over one 1 Gbit/s
// path were charged an eighth of the time).
json two_sites() {
  json cluster = consumer_cluster();
  cluster["nodes"][1]["cluster"] = "far";
  cluster["inter_cluster_links"] =
      json::array({{{"between", json::array({"default", "far"})}, {"bandwidth_gbps", 10}, {"latency_us", 40}}});
  return cluster;
}

// Two replicas of a two-stage pipeline at tp 4, stage 0 on a, stage 1 on b: at the hop all eight
// ranks send at once, each getting an eighth of the link (their NIC shares, 100 / 8, are wider).
TEST(Links, ThePipelineHopBetweenSitesSharesTheLinkAmongEveryRankCrossing) {
  Planner s(two_sites());
  const PartitionedClass c = s.partitioned({{{0, 4, 1}, {1, 4, 1}}, 2});
  const PipelineTimes times = s.evaluator.pipeline_times(c, 1);
  ASSERT_EQ(times.transfer.size(), 1u);
  EXPECT_DOUBLE_EQ(times.transfer[0], 50e-6 + s.bytes() * 8 / (10.0 / 8 * 1e9));
}

// Eight one-stage replicas in each site: after the sums inside each group, each of the eight shards'
// rings crosses the link at once, each on an eighth of it.
TEST(Links, SumsBetweenSitesShareTheLinkAmongTheirRings) {
  Planner s(two_sites());
  const PartitionedClass on_a = s.partitioned({{{0, 1, 1}}, 8});
  const PartitionedClass on_b = s.partitioned({{{1, 1, 1}}, 8});
  const CostModel& cost = s.evaluator.cost();
  const double bytes = 4 * (16 * cost.layer_parameters() + 2 * cost.embedding_parameters());
  const double inside =
      std::max(cost.allreduce_time({128, 3, false, 0}, bytes, 8), cost.allreduce_time({64, 3, false, 0}, bytes, 8));
  const double across = cost.allreduce_time({10.0 / 8, 50, false, 200}, bytes / 8, 2);
  EXPECT_DOUBLE_EQ(s.evaluator.dp_allreduce_times({on_a, on_b})[0][0], inside + across);
}

// Megatron-DeepSpeed cuts the embedding and the LM head over the tensor-parallel ranks (a vocabulary-
// parallel embedding, a column-parallel head), so its data-parallel sums carry 1 / tp of them;
// HeteroPP keeps them whole on every rank. Two replicas of one tp-4 stage share a node of a.
TEST(Links, DeepSpeedSumsAQuarterOfTheEmbeddingAndHeadAtTp4) {
  Planner s(consumer_cluster());
  const Evaluator deepspeed(s.canonical, s.model, Schedule::one_f_one_b, {}, PipelineRuntime::deepspeed);
  const PartitionedClass c = s.partitioned({{{0, 4, 1}}, 2});
  const CostModel& cost = s.evaluator.cost();
  const double blocks = 16 * cost.layer_parameters() / 4, embeddings = 2 * cost.embedding_parameters();
  const Link intra{128, 3, false, 0};
  EXPECT_DOUBLE_EQ(s.evaluator.dp_allreduce_time({c}), cost.allreduce_time(intra, 4 * (blocks + embeddings), 2));
  EXPECT_DOUBLE_EQ(deepspeed.dp_allreduce_time({c}), cost.allreduce_time(intra, 4 * (blocks + embeddings / 4), 2));
}

// 16-bit gradients halve the bytes summed; sums that overlap the last backward pass leave only what
// the pass does not cover exposed after the pipeline, never more than the whole sum.
TEST(Links, SixteenBitGradientsAndOverlapShortenTheExposedSum) {
  const ClassLayout layout{{{0, 1, 2}}, 8};
  Planner f32(consumer_cluster(), {.comm_bytes = 4, .overlap = false});
  Planner bf16(consumer_cluster(), {.comm_bytes = 2, .overlap = false});
  Planner overlapped(consumer_cluster(), {.comm_bytes = 4, .overlap = true});
  const PartitionedClass c = f32.partitioned(layout);
  const std::vector<PipelineTimes> times{f32.evaluator.pipeline_times(c, 1)};
  const double whole = f32.evaluator.dp_allreduce_time({c});
  EXPECT_GT(whole, 0);
  // A class's stages point into its own evaluator's cluster.
  EXPECT_LT(bf16.evaluator.dp_allreduce_time({bf16.partitioned(layout)}), 0.6 * whole);
  // Without overlap the first stage's sum (it ends the pipeline) is all exposed.
  const std::vector<std::vector<double>> sums = f32.evaluator.dp_allreduce_times({c});
  EXPECT_DOUBLE_EQ(f32.evaluator.exposed_allreduce_time({c}, times),
                   std::max(sums[0][0], sums[0][1] - times[0].backward[0] - times[0].transfer[0]));
  const double exposed = overlapped.evaluator.exposed_allreduce_time({overlapped.partitioned(layout)}, times);
  EXPECT_LT(exposed, f32.evaluator.exposed_allreduce_time({c}, times));
  EXPECT_GE(exposed, sums[0][0] / c.stages[0].layers);
}

// The distributed optimizer (ZeRO-1, ShardedAdamW) reduce-scatters the gradients, half an allreduce's
// traffic, and after the optimizer step gathers the updated weights back whole, the other half, which
// no backward pass hides. The weights travel in the model's dtype (each holder rounds its slice of a
// bf16 model before the gather): with 16-bit gradients the gather carries the sum's bytes, with f32
// gradients half of them (their latencies once).
TEST(Links, TheDistributedOptimizerGathersItsWeightsAfterTheStep) {
  const ClassLayout layout{{{0, 1, 2}}, 8};
  Planner plain(consumer_cluster(), {.comm_bytes = 2, .overlap = false});
  Planner sharded(consumer_cluster(), {.distributed_optimizer = true, .comm_bytes = 2, .overlap = false});
  const PartitionedClass c = plain.partitioned(layout), d = sharded.partitioned(layout);
  const std::vector<PipelineTimes> times{plain.evaluator.pipeline_times(c, 1)};
  const std::vector<std::vector<double>> sums = plain.evaluator.dp_allreduce_times({c});
  const double slowest = std::max(sums[0][0], sums[0][1]);
  const double gather = slowest / 2;
  Planner sharded_f32_sums(consumer_cluster(), {.distributed_optimizer = true, .comm_bytes = 4, .overlap = false});
  const PartitionedClass f = sharded_f32_sums.partitioned(layout);
  const std::vector<std::vector<double>> f32 = sharded_f32_sums.evaluator.dp_allreduce_times({f});
  const double f32_sum = std::max(f32[0][0], f32[0][1]) / 2;
  EXPECT_DOUBLE_EQ(sharded_f32_sums.evaluator.weight_gather_time({f}), gather);
  EXPECT_DOUBLE_EQ(
      sharded_f32_sums.evaluator.weight_gather_time({f}, sharded_f32_sums.evaluator.gradient_sum_times({f})), gather);
  EXPECT_GT(gather, 0.5 * f32_sum);
  EXPECT_LT(gather, 0.55 * f32_sum);
  EXPECT_DOUBLE_EQ(plain.evaluator.weight_gather_time({c}), 0);
  EXPECT_DOUBLE_EQ(sharded.evaluator.dp_allreduce_time({d}), slowest / 2);
  EXPECT_DOUBLE_EQ(sharded.evaluator.exposed_allreduce_time({d}, times),
                   std::max(sums[0][0] / 2, sums[0][1] / 2 - times[0].backward[0] - times[0].transfer[0]));
  EXPECT_DOUBLE_EQ(sharded.evaluator.weight_gather_time({d}), gather);
  EXPECT_DOUBLE_EQ(
      sharded.evaluator.after_pipeline_time({d}, times),
      sharded.evaluator.exposed_allreduce_time({d}, times) + sharded.evaluator.optimizer_time({d}) + gather);
  // A plan says so, and its step adds it.
  const Plan plan = sharded.evaluator.build_plan({d}, {{4, 0}}, 1);
  EXPECT_DOUBLE_EQ(plan.prediction.weight_gather_s, gather);
  EXPECT_DOUBLE_EQ(plan.prediction.step_time_s, plan.prediction.pipeline_time_s + plan.prediction.exposed_allreduce_s +
                                                    plan.prediction.optimizer_s + gather);
  EXPECT_DOUBLE_EQ(plan_from_json(to_json(plan)).prediction.weight_gather_s, gather);
}

}  // namespace
}  // namespace h2::heteroauto
