// What a rank's environment asks of DiComm (the H2_DICOMM_* variables and H2_FABRIC_PROVIDER),
// read and checked once when the rank joins; the settings every rank must share travel to the
// others as JSON and are compared there.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "h2/dicomm/communicator.hpp"

namespace h2::dicomm::detail {

struct WorldSettings {
  std::chrono::milliseconds timeout{0};    // H2_DICOMM_TIMEOUT, or CommOptions::timeout
  size_t piece_bytes = 0;                  // H2_DICOMM_PIECE_BYTES
  size_t small_bytes = 0;                  // H2_DICOMM_SMALL_BYTES
  int64_t message_bytes = -1;              // H2_DICOMM_FABRIC_MESSAGE_BYTES; -1: the provider's default
  bool force_staging = false;              // H2_DICOMM_STAGING
  std::string allreduce;                   // H2_DICOMM_ALLREDUCE: auto, ring, halving_doubling or hierarchical
  bool share_device_memory = true;         // H2_DICOMM_SHARED_MEMORY
  bool vendor_collectives = false;         // H2_DICOMM_VENDOR_COLLECTIVES
  std::string provider;                    // CommOptions::provider or H2_FABRIC_PROVIDER; "": choose
  std::string node_mode;                   // H2_DICOMM_NODE_TRANSPORT: auto, cma or off
  bool want_node_transport = true;         // what node_mode and the provider request give
  std::map<std::string, double> nic_gbps;  // H2_DICOMM_NIC_GBPS: NIC speeds that win over the drivers'
  std::string island;                      // H2_DICOMM_ISLAND: RDMA networks only between ranks alike

  // The settings every rank must have alike.
  nlohmann::json shared() const;
};

// Throws CommError(usage) naming the variable and what it may be.
WorldSettings read_world_settings(const CommOptions& options);

// Throws CommError(usage) naming the first rank whose shared settings differ from rank 0's.
void check_settings_alike(const std::vector<nlohmann::json>& shared_by_rank);

}  // namespace h2::dicomm::detail
