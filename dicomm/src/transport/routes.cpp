#include "routes.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "h2/dicomm/error.hpp"

namespace h2::dicomm::detail {

namespace {

// Providers over the network, best first: RDMA before sockets (Holmes: a pipeline's activations
// and a data-parallel group's gradients go over the RDMA island where there is one).
struct ProviderKind {
  const char* name;
  bool rdma;  // else a socket provider
};
constexpr ProviderKind kNetworkProviders[] = {{"verbs;ofi_rxm", true}, {"efa", true},  {"cxi", true},
                                              {"tcp;ofi_rxm", false},  {"net", false}, {"tcp", false}};

const ProviderKind* kind_of(const std::string& provider) {
  for (const ProviderKind& kind : kNetworkProviders)
    if (provider == kind.name) return &kind;
  return nullptr;
}

// Higher is better; -1 for a provider DiComm does not rank.
int network_class(const std::string& provider) {
  const ProviderKind* kind = kind_of(provider);
  return kind == nullptr ? -1 : static_cast<int>(std::end(kNetworkProviders) - kind);
}

bool rdma(const std::string& provider) {
  const ProviderKind* kind = kind_of(provider);
  return kind != nullptr && kind->rdma;
}

bool sockets(const std::string& provider) {
  const ProviderKind* kind = kind_of(provider);
  return kind != nullptr && !kind->rdma;
}

bool ipv4(const std::string& fabric) {
  return fabric.find('.') != std::string::npos && fabric.find(':') == std::string::npos;
}

// IPv6 link-local (fe80::/10): every interface has one under the same name, and none reaches
// beyond its own link without a scope.
bool link_local(const std::string& fabric) {
  std::string lower = fabric;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.starts_with("fe8") || lower.starts_with("fe9") || lower.starts_with("fea") || lower.starts_with("feb");
}

// Whether ranks `a` and `b` may use `x` (a's) and `y` (b's, of the same provider) at all.
bool usable(const Network& x, const Network& y, const RankNetworks& a, const RankNetworks& b, const RouteRules& rules) {
  const bool same_node = a.node == b.node;
  if (!rules.provider.empty() && x.provider != rules.provider) return false;
  if (x.provider == "shm") return same_node && rules.shm_safe;  // shm lacks FI_REMOTE_COMM
  if ((network_class(x.provider) < 0 && x.provider != rules.provider) || link_local(x.fabric)) return false;
  if (!same_node && rdma(x.provider) && a.island != b.island) return false;
  return same_node || (!x.loopback && !y.loopback);
}

}  // namespace

std::string Network::describe() const {
  return provider == "shm" || domain.empty() ? provider : provider + " on " + domain;
}

bool known_provider(const std::string& provider) {
  return provider == "shm" || network_class(provider) >= 0;
}

std::pair<int, int> choose_route(const RankNetworks& a, const RankNetworks& b, const RouteRules& rules) {
  using Score = std::tuple<bool, bool, int, double, bool, bool>;
  std::pair<int, int> best{-1, -1};
  Score best_score;
  std::string best_names;
  for (size_t i = 0; i < a.networks.size(); ++i)
    for (size_t j = 0; j < b.networks.size(); ++j) {
      const Network& x = a.networks[i];
      const Network& y = b.networks[j];
      // One network by name, or the networks both reach the store through, of one socket provider
      // and address family: reaching the store proves the route (nodes on routed subnets).
      const bool store_pair = x.reaches_store && y.reaches_store && x.provider == y.provider && sockets(x.provider) &&
                              ipv4(x.fabric) == ipv4(y.fabric);
      if ((x.key() != y.key() && !store_pair) || !usable(x, y, a, b, rules)) continue;
      // Every part is symmetric in the two ends, so both ranks of a pair rank alike.
      const Score score{x.provider == "shm",      x.loopback && y.loopback, network_class(x.provider),
                        std::min(x.gbps, y.gbps), ipv4(x.fabric),           x.reaches_store && y.reaches_store};
      const std::string names = std::min(x.key(), y.key()) + " " + std::max(x.key(), y.key());
      if (best.first < 0 || score > best_score || (score == best_score && names < best_names)) {
        best = {static_cast<int>(i), static_cast<int>(j)};
        best_score = score;
        best_names = names;
      }
    }
  return best;
}

double link_gbps(const RankNetworks& a, const RankNetworks& b, const RouteRules& rules) {
  if (a.node == b.node) return std::numeric_limits<double>::infinity();
  const auto [i, j] = choose_route(a, b, rules);
  if (i < 0) return 0;
  return std::min(a.networks[static_cast<size_t>(i)].gbps, b.networks[static_cast<size_t>(j)].gbps);
}

std::vector<int> choose_routes(const std::vector<RankNetworks>& ranks, int rank, const RouteRules& rules,
                               const std::vector<bool>& skip) {
  std::vector<int> routes(ranks.size(), -1);
  const RankNetworks& mine = ranks[static_cast<size_t>(rank)];
  auto list = [](const RankNetworks& r) {
    std::string text;
    for (const Network& n : r.networks)
      text +=
          (text.empty() ? "" : ", ") + n.describe() + " (" + n.fabric + (n.loopback ? ", this node only" : "") + ")";
    return text.empty() ? std::string("none") : text;
  };
  for (size_t peer = 0; peer < ranks.size(); ++peer) {
    if (static_cast<int>(peer) == rank || (peer < skip.size() && skip[peer])) continue;
    routes[peer] = choose_route(mine, ranks[peer], rules).first;
    if (routes[peer] >= 0) continue;
    throw CommError(CommErrorKind::usage, static_cast<int>(peer),
                    "DiComm: rank " + std::to_string(rank) + " (" + mine.node + ") and rank " + std::to_string(peer) +
                        " (" + ranks[peer].node + ") share no network" +
                        (rules.provider.empty() ? "" : " of provider '" + rules.provider + "' (H2_FABRIC_PROVIDER)") +
                        ": rank " + std::to_string(rank) + " has " + list(mine) + "; rank " + std::to_string(peer) +
                        " has " + list(ranks[peer]));
  }
  return routes;
}

std::map<std::string, double> parse_nic_speeds(const std::string& text) {
  std::map<std::string, double> speeds;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, end - start);
    const size_t equals = entry.find('=');
    const std::string name = entry.substr(0, equals);
    double gbps = 0;
    if (equals != std::string::npos) {
      const std::string number = entry.substr(equals + 1);
      char* stop = nullptr;
      gbps = std::strtod(number.c_str(), &stop);
      if (number.empty() || *stop != '\0') gbps = 0;
    }
    if (name.empty() || !(gbps > 0) || !std::isfinite(gbps))
      throw CommError(CommErrorKind::usage, -1,
                      "DiComm: H2_DICOMM_NIC_GBPS entry '" + entry +
                          "' is not NIC=GBITS_PER_S with a positive number (e.g. eth0=100,eth1=25)");
    speeds[name] = gbps;
    start = end + 1;
  }
  return speeds;
}

}  // namespace h2::dicomm::detail
