#include "h2/dicomm/bootstrap.hpp"

#include <unistd.h>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "h2/error.hpp"
#include "pmix_bootstrap.hpp"

namespace h2::dicomm {

namespace {

constexpr int kSlurmBasePort = 29500;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(H2_STATUS_INVALID_ARGUMENT, message);
}

// An empty variable counts as unset, so `export H2_RANK=` clears it the way users expect.
std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string show(const char* name, const std::string& value) {
  return std::string(name) + "='" + value + "'";
}

long long parse_number(const char* name, const std::string& value) {
  long long n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec == std::errc::result_out_of_range) invalid(show(name, value) + " is out of range");
  if (ec != std::errc() || end != value.data() + value.size()) invalid(show(name, value) + " is not a number");
  return n;
}

int parse_int(const char* name, const std::string& value, int min) {
  long long n = parse_number(name, value);
  if (n > INT_MAX) invalid(show(name, value) + " is out of range");
  if (n < min) invalid(std::string(name) + "=" + value + " is below " + std::to_string(min));
  return static_cast<int>(n);
}

int parse_port(const char* name, const std::string& value) {
  long long n = parse_number(name, value);
  if (n < 0 || n > 65535) invalid(std::string(name) + "=" + value + " is not a TCP port (0-65535)");
  return static_cast<int>(n);
}

// Both variables of a pair, or neither.
std::optional<std::pair<std::string, std::string>> pair_of(const char* first, const char* second) {
  auto a = env(first);
  auto b = env(second);
  if (a && !b) invalid(std::string(first) + " is set but " + second + " is not");
  if (b && !a) invalid(std::string(second) + " is set but " + first + " is not");
  if (!a) return std::nullopt;
  return std::make_pair(*a, *b);
}

void check_rank(int rank, const char* rank_name, int size, const char* size_name) {
  if (rank >= size)
    invalid(std::string(rank_name) + "=" + std::to_string(rank) + " is not below " + size_name + "=" +
            std::to_string(size));
}

void check_local(const RankInfo& info, const char* local_size_name, const char* size_name) {
  if (info.local_world_size > info.world_size)
    invalid(std::string(local_size_name) + "=" + std::to_string(info.local_world_size) + " is larger than " +
            size_name + "=" + std::to_string(info.world_size));
}

// The rank variables of `h2 launch` and torchrun have the same shape under different prefixes.
RankInfo from_rank_variables(const char* rank_name, const char* size_name, const char* local_rank_name,
                             const char* local_size_name, const char* addr_name, const char* port_name,
                             const std::pair<std::string, std::string>& rank_and_size) {
  RankInfo info;
  info.rank = parse_int(rank_name, rank_and_size.first, 0);
  info.world_size = parse_int(size_name, rank_and_size.second, 1);
  check_rank(info.rank, rank_name, info.world_size, size_name);
  if (auto local = pair_of(local_rank_name, local_size_name)) {
    info.local_rank = parse_int(local_rank_name, local->first, 0);
    info.local_world_size = parse_int(local_size_name, local->second, 1);
    check_rank(info.local_rank, local_rank_name, info.local_world_size, local_size_name);
    check_local(info, local_size_name, size_name);
  } else {
    // Without local variables the job is taken to be one node, as `h2 launch` runs it.
    info.local_rank = info.rank;
    info.local_world_size = info.world_size;
  }
  // H2_MASTER_* override torchrun's: under torchrun, the agent's own store may already hold MASTER_PORT.
  const char* used_addr = env("H2_MASTER_ADDR") ? "H2_MASTER_ADDR" : addr_name;
  const char* used_port = env("H2_MASTER_PORT") ? "H2_MASTER_PORT" : port_name;
  if (auto addr = env(used_addr)) info.master_addr = *addr;
  if (auto port = env(used_port)) info.master_port = parse_port(used_port, *port);
  if (info.world_size > 1 && info.master_port == 0) {
    if (!env(used_port))
      invalid(std::string(size_name) + "=" + std::to_string(info.world_size) + " but " + used_port +
              " is not set: the other ranks need to know the port of rank 0's rendezvous store");
    invalid(std::string(used_port) + "=0 with " + size_name + "=" + std::to_string(info.world_size) +
            ": the other ranks cannot find a port that rank 0 picks");
  }
  return info;
}

// The first host of a Slurm host list: "node[01-04,07],gpu5" -> "node01", "r[1-2]-n[005-008]" -> "r1-n005".
std::string first_slurm_host(const char* name, const std::string& list) {
  std::string host;
  size_t i = 0;
  auto malformed = [&](const std::string& why) { invalid(show(name, list) + " is not a Slurm host list: " + why); };
  while (i < list.size() && list[i] != ',') {
    if (list[i] == ']') malformed("unmatched ']'");
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    size_t close = list.find(']', i);
    if (close == std::string::npos) malformed("unmatched '['");
    std::string_view group(list.data() + i + 1, close - i - 1);
    std::string_view first = group.substr(0, group.find(','));
    std::string_view start = first.substr(0, first.find('-'));
    if (start.empty() || start.find_first_not_of("0123456789") != std::string_view::npos)
      malformed("'[" + std::string(group) + "]' is not a range of numbers");
    if (first.find('-') != std::string_view::npos) {
      std::string_view end = first.substr(first.find('-') + 1);
      if (end.empty() || end.find_first_not_of("0123456789") != std::string_view::npos)
        malformed("'[" + std::string(group) + "]' is not a range of numbers");
    }
    host += start;  // zero padding is part of the name
    i = close + 1;
  }
  if (host.empty()) malformed("no host");
  return host;
}

// SLURM_TASKS_PER_NODE, "2(x3),1": tasks on each node of the step, in node order.
std::vector<int> expand_tasks_per_node(const char* name, const std::string& value) {
  std::vector<int> counts;
  size_t i = 0;
  auto malformed = [&] { invalid(show(name, value) + " is not a list like '4(x2),3'"); };
  while (i <= value.size()) {
    size_t comma = value.find(',', i);
    std::string item = value.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    int repeat = 1;
    size_t paren = item.find('(');
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') malformed();
      std::string times = item.substr(paren + 2, item.size() - paren - 3);
      if (times.empty() || times.find_first_not_of("0123456789") != std::string::npos) malformed();
      repeat = parse_int(name, times, 1);
      item.resize(paren);
    }
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) malformed();
    int count = parse_int(name, item, 1);
    if (repeat > 1 << 20) malformed();
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return counts;
}

void apply_master_overrides(RankInfo& info) {
  if (auto addr = env("H2_MASTER_ADDR")) info.master_addr = *addr;
  if (auto port = env("H2_MASTER_PORT")) info.master_port = parse_port("H2_MASTER_PORT", *port);
}

RankInfo from_slurm(const std::string& procid) {
  RankInfo info;
  info.source = LaunchSource::slurm;
  auto ntasks = env("SLURM_NTASKS");
  if (!ntasks) invalid("SLURM_PROCID is set but SLURM_NTASKS is not");
  info.rank = parse_int("SLURM_PROCID", procid, 0);
  info.world_size = parse_int("SLURM_NTASKS", *ntasks, 1);
  check_rank(info.rank, "SLURM_PROCID", info.world_size, "SLURM_NTASKS");

  auto localid = env("SLURM_LOCALID");
  if (!localid) invalid("SLURM_PROCID is set but SLURM_LOCALID is not");
  info.local_rank = parse_int("SLURM_LOCALID", *localid, 0);
  const char* local_size_name = "SLURM_NTASKS_PER_NODE";
  if (auto per_node = env("SLURM_NTASKS_PER_NODE")) {
    info.local_world_size = parse_int("SLURM_NTASKS_PER_NODE", *per_node, 1);
  } else if (auto tasks = env("SLURM_TASKS_PER_NODE")) {
    local_size_name = "SLURM_TASKS_PER_NODE";
    std::vector<int> counts = expand_tasks_per_node("SLURM_TASKS_PER_NODE", *tasks);
    if (auto node = env("SLURM_NODEID")) {
      int node_id = parse_int("SLURM_NODEID", *node, 0);
      if (node_id >= static_cast<int>(counts.size()))
        invalid("SLURM_NODEID=" + *node + " is not below the " + std::to_string(counts.size()) +
                " nodes of SLURM_TASKS_PER_NODE='" + *tasks + "'");
      info.local_world_size = counts[static_cast<size_t>(node_id)];
    } else {
      for (int count : counts)
        if (count != counts.front())
          invalid("SLURM_TASKS_PER_NODE='" + *tasks + "' differs between nodes but SLURM_NODEID is not set");
      info.local_world_size = counts.front();
    }
  } else {
    invalid("SLURM_PROCID is set but neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is");
  }
  check_rank(info.local_rank, "SLURM_LOCALID", info.local_world_size, local_size_name);
  check_local(info, local_size_name, "SLURM_NTASKS");

  if (auto addr = env("H2_MASTER_ADDR")) {
    info.master_addr = *addr;
  } else {
    // Task 0 of a step runs on the first node of the step (block and cyclic distributions).
    const char* list_name = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    auto list = env(list_name);
    if (!list) invalid("SLURM_PROCID is set but SLURM_JOB_NODELIST is not (set H2_MASTER_ADDR to rank 0's host)");
    info.master_addr = first_slurm_host(list_name, *list);
  }
  if (auto port = env("H2_MASTER_PORT")) {
    info.master_port = parse_port("H2_MASTER_PORT", *port);
  } else {
    auto job = env("SLURM_JOB_ID");
    if (!job) invalid("SLURM_PROCID is set but SLURM_JOB_ID is not (set H2_MASTER_PORT to pick the store's port)");
    long long id = parse_number("SLURM_JOB_ID", *job);
    if (id < 0) invalid("SLURM_JOB_ID=" + *job + " is negative");
    info.master_port = kSlurmBasePort + static_cast<int>(id % 10000);
  }
  if (info.world_size > 1 && info.master_port == 0)
    invalid("H2_MASTER_PORT=0 with SLURM_NTASKS=" + std::to_string(info.world_size) +
            ": the other ranks cannot find a port that rank 0 picks");
  return info;
}

RankInfo from_pmix() {
  detail::PmixProcess process = detail::pmix_process();
  RankInfo info;
  info.source = LaunchSource::pmix;
  info.rank = process.rank;
  info.world_size = process.world_size;
  info.local_rank = process.local_rank;
  info.local_world_size = process.local_world_size;
  if (info.local_world_size < info.world_size) {
    // Peers on other nodes must reach rank 0 by its name; a single-node job stays on loopback.
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') info.master_addr = host;
  }
  apply_master_overrides(info);
  return info;
}

}  // namespace

const char* launch_source_name(LaunchSource source) {
  switch (source) {
    case LaunchSource::single: return "single process";
    case LaunchSource::h2: return "h2 launch";
    case LaunchSource::torchrun: return "torchrun";
    case LaunchSource::slurm: return "Slurm";
    case LaunchSource::pmix: return "PMIx";
  }
  return "unknown";
}

std::string RankInfo::describe() const {
  std::string store =
      master_port == 0 ? master_addr + ", port chosen by rank 0" : master_addr + ":" + std::to_string(master_port);
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (" + launch_source_name(source) +
         ", store " + store + ")";
}

RankInfo rank_info_from_environment() {
  RankInfo info;
  if (auto h2 = pair_of("H2_RANK", "H2_WORLD_SIZE")) {
    info = from_rank_variables("H2_RANK", "H2_WORLD_SIZE", "H2_LOCAL_RANK", "H2_LOCAL_WORLD_SIZE", "H2_MASTER_ADDR",
                               "H2_MASTER_PORT", *h2);
    info.source = LaunchSource::h2;
  } else if (auto torchrun = pair_of("RANK", "WORLD_SIZE")) {
    info = from_rank_variables("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                               *torchrun);
    info.source = LaunchSource::torchrun;
  } else if (pair_of("PMIX_RANK", "PMIX_NAMESPACE")) {
    info = from_pmix();
  } else if (auto procid = env("SLURM_PROCID")) {
    info = from_slurm(*procid);
  } else {
    apply_master_overrides(info);
  }
  if (auto token = env("H2_JOB_TOKEN")) info.token = *token;
  return info;
}

}  // namespace h2::dicomm
