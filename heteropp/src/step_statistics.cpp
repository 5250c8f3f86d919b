#include "step_statistics.hpp"

#include <algorithm>
#include <iterator>

namespace h2::heteropp {

namespace {

// The per-rank numbers as they travel, in this order, then the step's own below.
constexpr double RankStepStats::*kRankFields[] = {
    &RankStepStats::busy_s,          &RankStepStats::memory_used,    &RankStepStats::memory_total,
    &RankStepStats::peak_allocated,  &RankStepStats::peak_reserved,  &RankStepStats::plugin_allocations,
    &RankStepStats::gradient_comm_s, &RankStepStats::exposed_comm_s, &RankStepStats::optimizer_state};
constexpr size_t kRankFieldCount = std::size(kRankFields);
enum StepField { kStepSeconds = kRankFieldCount, kLossSum, kSquaredNorm, kFoundInf, kFields };

}  // namespace

StepTotals exchange_step_statistics(const dicomm::Communicator& world, Stream& stream, Timeline& timeline,
                                    const RankContribution& mine) {
  std::vector<double> values(kFields, 0.0);
  for (size_t f = 0; f < kRankFieldCount; ++f) values[f] = mine.stats.*kRankFields[f];
  values[kStepSeconds] = mine.step_s;
  values[kLossSum] = mine.loss_sum;
  values[kSquaredNorm] = mine.squared_norm;
  values[kFoundInf] = mine.found_inf ? 1 : 0;
  const Tensor in = Tensor::from_host(stream, values, {kFields}, DType::f64);
  const Tensor out = Tensor::empty(stream, {static_cast<int64_t>(kFields) * world.size()}, DType::f64);
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  world.allgather(stream, in, out);
  const std::vector<double> all = out.to_host(stream);
  timeline.add("allgather step stats", "comm", start, Timeline::Clock::now());

  StepTotals totals;
  for (int r = 0; r < world.size(); ++r) {
    const double* s = &all[static_cast<size_t>(r) * kFields];
    totals.loss_sum += s[kLossSum];
    totals.squared_norm += s[kSquaredNorm];
    totals.found_inf = totals.found_inf || s[kFoundInf] > 0;
    totals.seconds = std::max(totals.seconds, s[kStepSeconds]);
    RankStepStats rank;
    for (size_t f = 0; f < kRankFieldCount; ++f) rank.*kRankFields[f] = s[f];
    rank.bubble = s[kStepSeconds] > 0 ? std::max(0.0, 1 - rank.busy_s / s[kStepSeconds]) : 0;
    totals.ranks.push_back(rank);
  }
  return totals;
}

nlohmann::json step_report_json(const StepReport& r, const Placement& placement) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const StageRole& role = placement.roles[i];
    ranks.push_back({{"rank", i},
                     {"pipeline", role.pipeline},
                     {"replica", role.replica},
                     {"stage", role.stage},
                     {"busy_s", r.ranks[i].busy_s},
                     {"bubble", r.ranks[i].bubble},
                     {"memory_used_bytes", r.ranks[i].memory_used},
                     {"memory_total_bytes", r.ranks[i].memory_total},
                     {"peak_allocated_bytes", r.ranks[i].peak_allocated},
                     {"peak_reserved_bytes", r.ranks[i].peak_reserved},
                     {"plugin_allocations", r.ranks[i].plugin_allocations},
                     {"gradient_comm_s", r.ranks[i].gradient_comm_s},
                     {"exposed_comm_s", r.ranks[i].exposed_comm_s},
                     {"optimizer_state_bytes", r.ranks[i].optimizer_state}});
  }
  return {{"step", r.step},
          {"loss", r.loss},
          {"grad_norm", r.grad_norm},
          {"lr", r.lr},
          {"loss_scale", r.loss_scale},
          {"skipped", r.skipped},
          {"step_s", r.seconds},
          {"tokens_per_s", r.tokens_per_s},
          {"ranks", ranks}};
}

}  // namespace h2::heteropp
