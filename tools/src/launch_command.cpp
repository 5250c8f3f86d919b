#include "launch_command.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <stdexcept>

#include "format.hpp"
#include "h2/log.hpp"
#include "rank_processes.hpp"

namespace h2::tools {

namespace {

constexpr int kMaxRanks = 4096;
constexpr double kMaxGraceSeconds = 24 * 3600;

// Bad usage that CLI11 cannot see: exit code 2, like CLI11's own errors.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != std::string::npos; begin = end + 1)
    parts.push_back(text.substr(begin, end - begin));
  parts.push_back(text.substr(begin));
  return parts;
}

std::string quoted_command(const std::vector<std::string>& command) {
  std::string text;
  for (const std::string& arg : command) {
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>(){}") == std::string::npos;
    text += (text.empty() ? "" : " ") + (plain ? arg : "'" + arg + "'");
  }
  return text;
}

// A TCP port nobody listens on now: bind port 0 on the master address, read the port, close.
int free_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(address.c_str(), "0", &hints, &found); rc != 0)
    throw UsageError("--master-addr '" + address + "': " + gai_strerror(rc));
  std::string error = "no address";
  int port = 0;
  for (addrinfo* a = found; a != nullptr && port == 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else {
      error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port == 0)
    throw UsageError("cannot find a free TCP port on --master-addr " + address + " (" + error +
                     "); use an address of this machine or pass --master-port");
  return port;
}

// The caller's H2_JOB_TOKEN (so that several launchers can form one job), else 128 random bits.
std::string job_token() {
  if (const char* token = std::getenv("H2_JOB_TOKEN"); token != nullptr && *token != '\0') return token;
  std::array<unsigned char, 16> bytes{};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes.data()), bytes.size())) {
    std::random_device device;
    for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(device());
  }
  std::string hex;
  for (unsigned char byte : bytes) {
    char pair[3];
    std::snprintf(pair, sizeof pair, "%02x", byte);
    hex += pair;
  }
  return hex;
}

void check_device_entry(const std::string& entry) {
  const size_t colon = entry.find(':');
  const std::string plugin = entry.substr(0, colon);
  const auto bad = [&](const std::string& why) {
    return UsageError("--devices entry '" + entry + "': " + why + " (expected PLUGIN or PLUGIN:INDEX)");
  };
  if (plugin.empty()) throw bad("no plugin name");
  if (plugin.find_first_of(" \t\n") != std::string::npos) throw bad("the plugin name contains white space");
  if (colon == std::string::npos) return;
  const std::string index = entry.substr(colon + 1);
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos)
    throw bad("the index is not a non-negative integer");
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

double parse_grace(const std::string& text) {
  size_t used = 0;
  double value = std::nan("");
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(value >= 0 && value <= kMaxGraceSeconds)) return -1;
  return value;
}

}  // namespace

std::vector<std::string> device_per_rank(const std::string& devices, int ranks) {
  if (devices.empty()) return std::vector<std::string>(static_cast<size_t>(ranks));
  std::vector<std::string> entries = split(devices, ',');
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].empty())
      throw UsageError("--devices entry " + std::to_string(i + 1) + " of " + std::to_string(entries.size()) +
                       " is empty in '" + devices + "'");
    check_device_entry(entries[i]);
  }
  if (entries.size() == 1) return std::vector<std::string>(static_cast<size_t>(ranks), entries[0]);
  if (entries.size() != static_cast<size_t>(ranks))
    throw UsageError("--devices has " + std::to_string(entries.size()) + " entries for " + std::to_string(ranks) +
                     (ranks == 1 ? " rank" : " ranks") + "; give one entry for every rank or " + std::to_string(ranks) +
                     " entries, one per rank");
  return entries;
}

std::vector<std::vector<int>> cpus_per_rank(const std::vector<int>& allowed, int ranks) {
  const size_t n = allowed.size();
  std::vector<std::vector<int>> cpus(static_cast<size_t>(ranks));
  if (n == 0) return cpus;
  for (size_t r = 0; r < cpus.size(); ++r) {
    if (cpus.size() > n) {
      cpus[r] = {allowed[r % n]};
    } else {
      for (size_t i = r * n / cpus.size(); i < (r + 1) * n / cpus.size(); ++i) cpus[r].push_back(allowed[i]);
    }
  }
  return cpus;
}

namespace {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error(std::string("--bind cores: sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::vector<std::string> names;
  for (int cpu : cpus) names.push_back(std::to_string(cpu));
  return join(names, ",");
}

}  // namespace

void add_launch_command(CLI::App& app, LaunchOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand(
      "launch", "Start N local ranks of a program: rank environment, prefixed output, all stopped when one fails");
  command->footer(
      "Usage: h2 launch -n N [OPTIONS] -- COMMAND [ARGS...]\n"
      "Example: h2 launch -n 2 --devices cpu-reference -- sh -c 'echo rank $H2_RANK of $H2_WORLD_SIZE'");
  command->add_option("-n,--ranks", options.ranks, "How many ranks to start")
      ->required()
      ->check(CLI::Range(1, kMaxRanks));
  command->add_option("--devices", options.devices,
                      "H2_DEVICE of the ranks: PLUGIN[:INDEX], one entry for every rank or one per rank, "
                      "comma-separated (cuda:0,cuda:1,cpu-reference)");
  command->add_option("--master-addr", options.master_addr, "Address of rank 0's rendezvous store (H2_MASTER_ADDR)")
      ->capture_default_str();
  command
      ->add_option("--master-port", options.master_port,
                   "Port of rank 0's rendezvous store (H2_MASTER_PORT; default: a free port)")
      ->check(CLI::Range(1, 65535));
  command
      ->add_option("--grace", options.grace_seconds,
                   "Seconds the other ranks get to exit on their own after one fails or a signal is forwarded, "
                   "before SIGTERM (then SIGKILL 3 s later)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {
            return parse_grace(text) < 0 ? "must be a number of seconds from 0 to 86400" : std::string();
          },
          "SECONDS"));
  command->add_flag("--no-prefix", options.no_prefix, "Do not put \"[rank R] \" in front of the ranks' output lines");
  command
      ->add_option("--bind", options.bind,
                   "none: ranks run wherever the kernel puts them; cores: each rank is bound to its own share "
                   "of the launcher's CPUs (round robin when ranks outnumber them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "cores"}));
  command->add_option("command", options.command, "The program to run and its arguments, after --");
  command->callback([&options, &exit_code] { exit_code = run_launch(options); });
}

int run_launch(const LaunchOptions& options) {
  try {
    if (options.command.empty())
      throw UsageError("a command to run is required after --, for example: h2 launch -n 2 -- python train.py");
    if (options.ranks < 1 || options.ranks > kMaxRanks)
      throw UsageError("-n must be from 1 to " + std::to_string(kMaxRanks));
    if (options.master_addr.empty()) throw UsageError("--master-addr is empty");
    const std::vector<std::string> devices = device_per_rank(options.devices, options.ranks);
    const int port = options.master_port != 0 ? options.master_port : free_port(options.master_addr);
    const std::string token = job_token();
    const std::vector<std::vector<int>> cpus = options.bind == "cores"
                                                   ? cpus_per_rank(allowed_cpus(), options.ranks)
                                                   : std::vector<std::vector<int>>(static_cast<size_t>(options.ranks));

    std::vector<RankProcess> ranks(static_cast<size_t>(options.ranks));
    for (int r = 0; r < options.ranks; ++r) {
      RankProcess& rank = ranks[static_cast<size_t>(r)];
      rank.argv = options.command;
      rank.environment = {
          {"H2_RANK", std::to_string(r)},
          {"H2_WORLD_SIZE", std::to_string(options.ranks)},
          {"H2_LOCAL_RANK", std::to_string(r)},
          {"H2_LOCAL_WORLD_SIZE", std::to_string(options.ranks)},
          {"H2_MASTER_ADDR", options.master_addr},
          {"H2_MASTER_PORT", std::to_string(port)},
          {"H2_JOB_TOKEN", token},
      };
      if (!devices[static_cast<size_t>(r)].empty())
        rank.environment.emplace_back("H2_DEVICE", devices[static_cast<size_t>(r)]);
      rank.cpus = cpus[static_cast<size_t>(r)];
      if (!rank.cpus.empty())
        log(LogLevel::info, "launch", "rank " + std::to_string(r) + " bound to CPUs " + cpu_list(rank.cpus));
    }
    log(LogLevel::info, "launch",
        std::to_string(options.ranks) + (options.ranks == 1 ? " rank" : " ranks") + " of " +
            quoted_command(options.command) + ", master " + options.master_addr + ":" + std::to_string(port) +
            (options.devices.empty() ? "" : ", devices " + options.devices) + ", grace " +
            seconds_text(options.grace_seconds));

    SupervisorOptions supervisor;
    supervisor.prefix_output = !options.no_prefix;
    supervisor.grace_seconds = options.grace_seconds;
    return run_rank_processes(ranks, supervisor);
  } catch (const UsageError& e) {
    std::cerr << "h2 launch: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "h2 launch: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace h2::tools
