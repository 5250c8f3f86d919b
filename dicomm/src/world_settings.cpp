#include "world_settings.hpp"

#include <algorithm>
#include <cstdlib>

#include "transport/routes.hpp"

namespace h2::dicomm::detail {

namespace {

uint64_t env_size(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0' || value < min || value > max)
    throw CommError(CommErrorKind::usage, -1,
                    std::string("DiComm: ") + name + "='" + text + "' is not a whole number from " +
                        std::to_string(min) + " to " + std::to_string(max));
  return value;
}

// One of `choices` (the first is the default, also for an empty setting).
std::string env_choice(const char* name, const std::vector<std::string>& choices) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return choices.front();
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
  std::string list;
  for (const auto& choice : choices) list += (list.empty() ? "" : ", ") + choice;
  throw CommError(CommErrorKind::usage, -1, std::string("DiComm: ") + name + "='" + text + "' is not one of " + list);
}

}  // namespace

WorldSettings read_world_settings(const CommOptions& options) {
  WorldSettings s;
  s.timeout = options.timeout.count() > 0
                  ? options.timeout
                  : std::chrono::milliseconds(1000 * env_size("H2_DICOMM_TIMEOUT", 300, 1, 86400 * 7));
  // Pieces are the unit on the wire and of the staging pipeline; every rank must cut alike. 4 MiB,
  // as NCCL's buffers: on shm, 1 MiB pieces cost a third of the point-to-point bandwidth in
  // per-message overhead, and allreduce was no faster for the finer pipeline (bench/dicomm).
  s.piece_bytes = env_size("H2_DICOMM_PIECE_BYTES", 4 << 20, 4096, 1ull << 30);
  s.small_bytes = env_size("H2_DICOMM_SMALL_BYTES", 64 << 10, 0, 1ull << 30);
  if (std::getenv("H2_DICOMM_FABRIC_MESSAGE_BYTES") != nullptr)
    s.message_bytes = static_cast<int64_t>(env_size("H2_DICOMM_FABRIC_MESSAGE_BYTES", 0, 0, 1ull << 30));
  if (s.message_bytes > 0 && s.message_bytes < 4096)
    throw CommError(CommErrorKind::usage, -1,
                    "DiComm: H2_DICOMM_FABRIC_MESSAGE_BYTES=" + std::to_string(s.message_bytes) +
                        " is below 4096 (0 sends every message whole)");
  s.force_staging = env_size("H2_DICOMM_STAGING", 0, 0, 1) == 1;
  s.allreduce = env_choice("H2_DICOMM_ALLREDUCE", {"auto", "ring", "halving_doubling", "hierarchical"});
  s.share_device_memory = env_choice("H2_DICOMM_SHARED_MEMORY", {"auto", "off"}) == "auto";
  // Off by default until the plugins' libraries have been measured against DiComm's own algorithms.
  s.vendor_collectives = env_choice("H2_DICOMM_VENDOR_COLLECTIVES", {"off", "auto"}) == "auto";
  const char* provider_env = std::getenv("H2_FABRIC_PROVIDER");
  s.provider = !options.provider.empty() ? options.provider : provider_env ? provider_env : "";
  // auto: the node transport between ranks of one node, unless a libfabric provider was asked
  // for (a test of that provider, say); cma: always; off: libfabric carries everything.
  s.node_mode = env_choice("H2_DICOMM_NODE_TRANSPORT", {"auto", "cma", "off"});
  s.want_node_transport = s.node_mode == "cma" || (s.node_mode == "auto" && s.provider.empty());
  if (const char* speeds = std::getenv("H2_DICOMM_NIC_GBPS")) s.nic_gbps = parse_nic_speeds(speeds);
  if (const char* island = std::getenv("H2_DICOMM_ISLAND")) s.island = island;
  return s;
}

namespace {

// Each shared setting's key and the variable that sets it.
const std::vector<std::pair<const char*, const char*>> kSharedSettings = {
    {"piece_bytes", "H2_DICOMM_PIECE_BYTES"},
    {"small_bytes", "H2_DICOMM_SMALL_BYTES"},
    {"node_transport", "H2_DICOMM_NODE_TRANSPORT"},
    {"allreduce", "H2_DICOMM_ALLREDUCE"},
    {"vendor_collectives", "H2_DICOMM_VENDOR_COLLECTIVES"},
};

}  // namespace

nlohmann::json WorldSettings::shared() const {
  const nlohmann::json values = {piece_bytes, small_bytes, node_mode, allreduce, vendor_collectives ? "auto" : "off"};
  nlohmann::json shared;
  for (size_t i = 0; i < kSharedSettings.size(); ++i) shared[kSharedSettings[i].first] = values[i];
  return shared;
}

void check_settings_alike(const std::vector<nlohmann::json>& shared_by_rank) {
  for (size_t r = 1; r < shared_by_rank.size(); ++r)
    for (const auto& [key, variable] : kSharedSettings)
      if (shared_by_rank[r].value(key, nlohmann::json()) != shared_by_rank[0].value(key, nlohmann::json()))
        throw CommError(CommErrorKind::usage, static_cast<int>(r),
                        "DiComm: rank " + std::to_string(r) + " has another " + variable + " than rank 0 (" +
                            shared_by_rank[r].value(key, nlohmann::json()).dump() + ", rank 0: " +
                            shared_by_rank[0].value(key, nlohmann::json()).dump() + "); set it alike on every rank");
}

}  // namespace h2::dicomm::detail
