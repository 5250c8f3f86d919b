// What every rank contributes to a step's report, exchanged with one allgather, and the job's totals
// made of them (the loss over the last stages, the global gradient norm, overflow, the slowest rank's
// time, every rank's row); and the step's row of metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/heteropp/trainer.hpp"

namespace h2::heteropp {

struct RankContribution {
  RankStepStats stats;  // its bubble is left out: it follows from busy_s and step_s
  double step_s = 0;    // the rank's wall time of the step so far
  double loss_sum = 0;  // the losses it computed (a last stage's first tensor-parallel rank), unweighted
  double squared_norm = 0;
  bool found_inf = false;
};

struct StepTotals {
  double loss_sum = 0, squared_norm = 0;
  bool found_inf = false;
  double seconds = 0;                // the slowest rank's
  std::vector<RankStepStats> ranks;  // by world rank, with their bubbles
};

// Collective over `world`; the allgather goes into `timeline`.
StepTotals exchange_step_statistics(const dicomm::Communicator& world, Stream& stream, Timeline& timeline,
                                    const RankContribution& mine);

// The step's row of metrics.jsonl: the report and each rank's place in the plan and numbers.
nlohmann::json step_report_json(const StepReport& report, const Placement& placement);

}  // namespace h2::heteropp
