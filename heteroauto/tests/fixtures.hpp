// Small descriptions the planner's tests share.
#pragma once

#include <nlohmann/json.hpp>

namespace h2::heteroauto::test {

// Two device types in one cluster: "fast" (2x the peak of "slow"), 8 and 4 devices.
inline nlohmann::json two_type_cluster() {
  return nlohmann::json::parse(R"({
    "name": "two-types",
    "device_types": [
      {"name": "fast", "vendor": "A", "peak_tflops": {"bf16": 200}, "memory_gib": 80, "efficiency": 0.5,
       "runtime_overhead_gib": 2},
      {"name": "slow", "vendor": "B", "peak_tflops": {"bf16": 100}, "memory_gib": 32, "efficiency": 0.5,
       "runtime_overhead_gib": 2}
    ],
    "nic_types": [{"name": "ib", "type": "infiniband", "bandwidth_gbps": 200, "latency_us": 2}],
    "nodes": [
      {"name": "fast-nodes", "device_type": "fast", "count": 1, "devices_per_node": 8,
       "intra_node_bandwidth_gbps": 2400, "nic": "ib", "nics_per_node": 8},
      {"name": "slow-nodes", "device_type": "slow", "count": 1, "devices_per_node": 4,
       "intra_node_bandwidth_gbps": 800, "nic": "ib", "nics_per_node": 4}
    ],
    "device_direct_rdma": [["A", "A"], ["B", "B"]]
  })");
}

inline nlohmann::json small_model() {
  return nlohmann::json::parse(R"({
    "name": "small", "layers": 2, "hidden": 64, "ffn": 256, "heads": 4, "seq_len": 16, "vocab": 100,
    "global_batch": 8, "micro_batch_sizes": [1, 2], "dtype": "bf16"
  })");
}

inline nlohmann::json model_7b() {
  return nlohmann::json::parse(R"({
    "name": "dense-7b", "layers": 32, "hidden": 4096, "ffn": 11008, "heads": 32, "seq_len": 4096,
    "vocab": 32000, "global_batch": 512, "micro_batch_sizes": [1, 2], "dtype": "bf16", "mlp": "swiglu"
  })");
}

}  // namespace h2::heteroauto::test
