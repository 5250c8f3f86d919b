#include "h2/heteroauto/schedule.hpp"

#include <algorithm>

namespace h2::heteroauto {

std::vector<PassStep> stage_schedule(Schedule schedule, int stage, int stages, int micro_batches) {
  std::vector<PassStep> steps;
  steps.reserve(2 * static_cast<size_t>(std::max(0, micro_batches)));
  const int warmup = schedule == Schedule::gpipe ? micro_batches : std::min(stages - stage - 1, micro_batches);
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) steps.push_back({true, forwards});
  for (; forwards < micro_batches; ++forwards, ++backwards) {
    steps.push_back({true, forwards});
    steps.push_back({false, backwards});
  }
  for (; backwards < micro_batches; ++backwards) steps.push_back({false, backwards});
  return steps;
}

std::string schedule_string(const std::vector<PassStep>& steps) {
  std::string text;
  for (const PassStep& s : steps)
    text += (text.empty() ? "" : " ") + std::string(s.forward ? "F" : "B") + std::to_string(s.micro_batch);
  return text;
}

}  // namespace h2::heteroauto
