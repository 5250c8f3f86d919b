#include "pass_timer.hpp"

#include <chrono>

namespace h2::heteropp {

namespace {
Timeline::Clock::time_point after(Timeline::Clock::time_point anchor, float milliseconds) {
  return anchor +
         std::chrono::duration_cast<Timeline::Clock::duration>(std::chrono::duration<double, std::milli>(milliseconds));
}
}  // namespace

PassTimer::PassTimer(const Device& device)
    : device_(device), use_events_(device.plugin_api().event_elapsed_ms != nullptr) {}

Event& PassTimer::event(size_t index) {
  while (events_.size() <= index) events_.push_back(device_.create_event(/*timing=*/true));
  return events_[index];
}

void PassTimer::begin_step(Stream& stream) {
  passes_.clear();
  if (!use_events_) return;
  Event& anchor = event(0);
  anchor.record(stream);
  anchor.synchronize();
  anchor_time_ = Timeline::Clock::now();
}

void PassTimer::start(Stream& stream) {
  pending_start_ = Timeline::Clock::now();
  if (use_events_) event(1 + 2 * passes_.size()).record(stream);
}

void PassTimer::stop(Stream& stream, std::string name, int micro_batch) {
  Pass pass{std::move(name), micro_batch, pending_start_, {}};
  if (use_events_) {
    event(2 + 2 * passes_.size()).record(stream);
  } else {
    stream.synchronize();
    pass.host_end = Timeline::Clock::now();
  }
  passes_.push_back(std::move(pass));
}

double PassTimer::finish_step(Timeline& timeline) {
  double busy_s = 0;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& pass = passes_[i];
    if (use_events_) {
      event(2 + 2 * i).synchronize();
      const float start_ms = Event::elapsed_ms(event(0), event(1 + 2 * i));
      const float end_ms = Event::elapsed_ms(event(0), event(2 + 2 * i));
      pass.host_start = after(anchor_time_, start_ms);
      pass.host_end = after(anchor_time_, end_ms);
    }
    busy_s += std::chrono::duration<double>(pass.host_end - pass.host_start).count();
    timeline.add(pass.name, "compute", pass.host_start, pass.host_end, {{"micro_batch", pass.micro_batch}});
  }
  passes_.clear();
  return busy_s;
}

}  // namespace h2::heteropp
