#include "h2/heteroauto/simulator.hpp"

#include <algorithm>
#include <stdexcept>

namespace h2::heteroauto {

double outgoing_send(const PipelineTimes& times, int stage, bool forward) {
  if (!times.blocking_sends) return 0;
  const int p = static_cast<int>(times.forward.size());
  if (forward) return stage + 1 < p ? times.transfer[static_cast<size_t>(stage)] : 0;
  return stage > 0 ? times.transfer[static_cast<size_t>(stage - 1)] : 0;
}

double input_arrives(const PipelineTimes& times, const std::vector<std::vector<double>>& forward_end,
                     const std::vector<std::vector<double>>& backward_end, int stage, PassStep op) {
  const int p = static_cast<int>(times.forward.size()), k = stage;
  double ready;
  if (op.forward) {
    ready = k == 0 ? 0 : forward_end[k - 1][op.micro_batch];
    if (ready < 0) return -1;
    if (k > 0) ready += times.transfer[k - 1];
  } else {
    ready = k == p - 1 ? forward_end[k][op.micro_batch] : backward_end[k + 1][op.micro_batch];
    if (ready < 0) return -1;
    if (k < p - 1) ready += times.transfer[k];
  }
  return ready;
}

namespace {

// simulate_pipeline, recording every pass in `ops` only where asked: the planner simulates thousands
// of candidate steps and reads their makespans only (growing the list was a tenth of a large search).
Simulation simulate(const PipelineTimes& times, int m, Schedule schedule, bool record_ops) {
  const int p = static_cast<int>(times.forward.size());
  if (p == 0) throw std::invalid_argument("a pipeline needs at least one stage");
  if (m < 1) throw std::invalid_argument("a pipeline needs at least one micro-batch");
  if (static_cast<int>(times.backward.size()) != p || static_cast<int>(times.transfer.size()) != p - 1)
    throw std::invalid_argument("stage and transfer times do not match the number of stages");

  // Completion times; -1 while not yet run.
  std::vector<std::vector<double>> forward_end(p, std::vector<double>(m, -1)), backward_end = forward_end;
  std::vector<std::vector<PassStep>> orders(p);
  for (int k = 0; k < p; ++k) orders[k] = stage_schedule(schedule, k, p, m);
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  Simulation sim;
  sim.busy.assign(p, 0);
  size_t remaining = static_cast<size_t>(2) * p * m;
  while (remaining > 0) {
    bool progress = false;
    for (int k = 0; k < p; ++k) {
      while (next[k] < orders[k].size()) {
        const PassStep op = orders[k][next[k]];
        const double ready = input_arrives(times, forward_end, backward_end, k, op);
        if (ready < 0) break;
        const double start = std::max(ready, free_at[k]);
        const double duration = op.forward ? times.forward[k] : times.backward[k];
        const double end = start + duration;
        (op.forward ? forward_end : backward_end)[k][op.micro_batch] = end;
        free_at[k] = end + outgoing_send(times, k, op.forward);
        sim.busy[k] += duration;
        if (record_ops) sim.ops.push_back({k, op.micro_batch, !op.forward, start, end});
        ++next[k];
        --remaining;
        progress = true;
      }
    }
    if (!progress) throw std::logic_error("pipeline schedule deadlocked (a bug in the simulator)");
  }
  for (int k = 0; k < p; ++k) sim.makespan = std::max(sim.makespan, free_at[k]);
  double busy = 0;
  for (double b : sim.busy) busy += b;
  sim.bubble_fraction = sim.makespan > 0 ? 1 - busy / (p * sim.makespan) : 0;
  return sim;
}

}  // namespace

Simulation simulate_pipeline(const PipelineTimes& times, int m, Schedule schedule) {
  return simulate(times, m, schedule, true);
}

Simulation simulate_step(const PipelineTimes& times, int micro_batches, Schedule schedule) {
  // Past the transient: kExactMicroBatches, or twice the stages of a pipeline deeper than that.
  const int exact = std::max(kExactMicroBatches, 2 * static_cast<int>(times.forward.size()));
  if (micro_batches < exact + kRegimePeriod) {
    return simulate(times, micro_batches, schedule, false);
  }
  // m0 micro-batches are as many as `micro_batches` modulo the period: extrapolating from m0 by whole
  // periods steps over the regime's cycle exactly.
  const int m0 = exact + (micro_batches - exact) % kRegimePeriod;
  Simulation sim = simulate(times, m0, schedule, false);
  const double period_later = simulate(times, m0 + kRegimePeriod, schedule, false).makespan;
  sim.makespan += static_cast<double>(micro_batches - m0) / kRegimePeriod * (period_later - sim.makespan);
  const int p = static_cast<int>(times.forward.size());
  double busy = 0;
  for (int k = 0; k < p; ++k) {
    sim.busy[k] = micro_batches * (times.forward[k] + times.backward[k]);
    busy += sim.busy[k];
  }
  sim.bubble_fraction = sim.makespan > 0 ? std::max(0.0, 1 - busy / (p * sim.makespan)) : 0;
  return sim;
}

}  // namespace h2::heteroauto
