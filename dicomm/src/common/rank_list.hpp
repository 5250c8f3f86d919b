// Ranks as text for log lines and messages: "0,2,5".
#pragma once

#include <string>
#include <vector>

namespace h2::dicomm::detail {

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

}  // namespace h2::dicomm::detail
