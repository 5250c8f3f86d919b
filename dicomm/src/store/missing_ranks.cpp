#include "missing_ranks.hpp"

#include <algorithm>
#include <cstdio>

namespace h2::dicomm::detail {
namespace {

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

std::pair<int, std::string> missing_ranks(const std::vector<RankActivity>& ranks, int self,
                                          std::chrono::milliseconds timeout) {
  struct Outside {
    int rank;
    std::chrono::milliseconds for_how_long;
  };
  std::vector<Outside> outside;
  std::vector<int> waiting, unknown;
  for (const RankActivity& a : ranks) {
    if (a.rank == self || !a.connected) continue;  // a rank that left or failed is reported as such
    if (!a.reported) {
      unknown.push_back(a.rank);
    } else if (a.waiting) {
      waiting.push_back(a.rank);
    } else {
      outside.push_back({a.rank, a.in_state + a.heard_ago});
    }
  }
  std::sort(outside.begin(), outside.end(), [](const Outside& a, const Outside& b) {
    return a.for_how_long > b.for_how_long || (a.for_how_long == b.for_how_long && a.rank < b.rank);
  });
  std::vector<int> suspects;
  std::string since;
  for (const Outside& o : outside)
    if (o.for_how_long >= timeout / 2) {
      suspects.push_back(o.rank);
      since += (since.empty() ? "" : ", ") + seconds_text(o.for_how_long);
    }
  std::string text;
  int blamed = -1;
  if (!suspects.empty()) {
    blamed = suspects.front();
    text = "; " + rank_list(suspects) + (suspects.size() == 1 ? " is" : " are") +
           " alive but not waiting in DiComm: out of it for " + since +
           " (hanging in its own code, or computing for longer than the timeout)";
  } else if (outside.empty() && unknown.empty()) {
    text =
        "; every other rank is waiting in DiComm too, so the ranks wait for each other (operations called "
        "in different orders, or with other peers or tags, on different ranks)";
  } else if (!outside.empty()) {
    std::vector<int> busy;
    for (const Outside& o : outside) busy.push_back(o.rank);
    text = "; " + rank_list(busy) + " left DiComm less than half the timeout ago";
  }
  if (!unknown.empty()) text += "; " + rank_list(unknown) + " did not say whether it waits";
  if (!suspects.empty() && !waiting.empty()) text += "; " + rank_list(waiting) + " waiting in DiComm too";
  return {blamed, text};
}

}  // namespace h2::dicomm::detail
