// simulate_shared (simulator.hpp): pipelines whose stages share one host's cores, simulated event by
// event with every busy stage's speed set by how many others are busy at that moment.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "h2/heteroauto/simulator.hpp"

namespace h2::heteroauto {

namespace {

// One stage of one pipeline as the simulation goes: its passes in order, the one running (if any),
// and how much of it is left in full-speed seconds.
struct StageState {
  size_t pipeline = 0;
  int stage = 0;
  std::vector<PassStep> order;
  size_t next = 0;
  bool running = false;
  double left = 0, started = 0, free_at = 0;
};

}  // namespace

std::vector<Simulation> simulate_shared(const std::vector<SharedPipeline>& pipelines, double cores, Schedule schedule) {
  if (!(cores > 0)) throw std::invalid_argument("a shared host needs cores > 0");
  std::vector<Simulation> sims(pipelines.size());
  // Completion times per pipeline, stage and micro-batch; -1 while not yet run.
  std::vector<std::vector<std::vector<double>>> forward_end(pipelines.size()), backward_end(pipelines.size());
  std::vector<StageState> stages;
  size_t remaining = 0;
  for (size_t i = 0; i < pipelines.size(); ++i) {
    const SharedPipeline& pipeline = pipelines[i];
    const int p = static_cast<int>(pipeline.times.forward.size()), m = pipeline.micro_batches;
    if (p == 0) throw std::invalid_argument("a pipeline needs at least one stage");
    if (m < 1) throw std::invalid_argument("a pipeline needs at least one micro-batch");
    if (static_cast<int>(pipeline.times.backward.size()) != p ||
        static_cast<int>(pipeline.times.transfer.size()) != p - 1 || static_cast<int>(pipeline.demand.size()) != p)
      throw std::invalid_argument("stage, transfer and demand sizes do not match the number of stages");
    forward_end[i].assign(p, std::vector<double>(m, -1));
    backward_end[i] = forward_end[i];
    sims[i].busy.assign(p, 0);
    for (int k = 0; k < p; ++k) stages.push_back({i, k, stage_schedule(schedule, k, p, m)});
    remaining += static_cast<size_t>(2) * p * m;
  }
  // When the stage's next pass may start (its input arrived, the stage free); -1 while its input is not
  // yet produced.
  const auto ready_at = [&](const StageState& s) {
    const double ready = input_arrives(pipelines[s.pipeline].times, forward_end[s.pipeline], backward_end[s.pipeline],
                                       s.stage, s.order[s.next]);
    return ready < 0 ? -1.0 : std::max(ready, s.free_at);
  };
  const auto demand_of = [&](const StageState& s) { return pipelines[s.pipeline].demand[s.stage]; };

  double now = 0;
  while (remaining > 0) {
    // Start every pass whose input is there.
    for (StageState& s : stages) {
      if (s.running || s.next == s.order.size()) continue;
      const double ready = ready_at(s);
      if (ready < 0 || ready > now) continue;
      const PassStep op = s.order[s.next];
      const PipelineTimes& t = pipelines[s.pipeline].times;
      s.running = true;
      s.started = now;
      s.left = op.forward ? t.forward[s.stage] : t.backward[s.stage];
    }
    double load = 0;
    for (const StageState& s : stages)
      if (s.running) load += demand_of(s);
    const double shared_speed = load > cores ? cores / load : 1.0;
    const auto speed = [&](const StageState& s) { return demand_of(s) > 0 ? shared_speed : 1.0; };
    // The next event: a pass ending at the present speeds, or a waiting pass's input arriving.
    double next = std::numeric_limits<double>::infinity();
    for (const StageState& s : stages) {
      if (s.running)
        next = std::min(next, now + s.left / speed(s));
      else if (s.next < s.order.size())
        if (const double ready = ready_at(s); ready > now) next = std::min(next, ready);
    }
    if (!(next < std::numeric_limits<double>::infinity()))
      throw std::logic_error("shared pipeline schedule deadlocked (a bug in the simulator)");
    for (StageState& s : stages) {
      if (!s.running) continue;
      const double ends = now + s.left / speed(s);
      s.left -= (next - now) * speed(s);
      if (ends > next) continue;
      const PassStep op = s.order[s.next];
      Simulation& sim = sims[s.pipeline];
      (op.forward ? forward_end : backward_end)[s.pipeline][s.stage][op.micro_batch] = next;
      sim.busy[s.stage] += next - s.started;
      sim.ops.push_back({s.stage, op.micro_batch, !op.forward, s.started, next});
      s.free_at = next + outgoing_send(pipelines[s.pipeline].times, s.stage, op.forward);
      s.running = false;
      ++s.next;
      --remaining;
    }
    now = next;
  }
  for (size_t i = 0; i < sims.size(); ++i) {
    Simulation& sim = sims[i];
    double busy = 0;
    for (double b : sim.busy) busy += b;
    for (const SimulatedOp& op : sim.ops) sim.makespan = std::max(sim.makespan, op.end);
    const double p = static_cast<double>(sim.busy.size());
    sim.bubble_fraction = sim.makespan > 0 ? 1 - busy / (p * sim.makespan) : 0;
  }
  return sims;
}

}  // namespace h2::heteroauto
