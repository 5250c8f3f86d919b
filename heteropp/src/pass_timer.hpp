// The device time of a stage's forward and backward passes, measured with events around each pass
// and read once per step: the host never waits for a pass to finish before enqueuing the next one
// (a synchronize after every pass would leave the device idle while the host catches up). Event
// times are mapped to the host clock through an anchor event recorded and awaited at the start of
// the step, so the passes line up with the timeline's host-timed communication. A plugin without
// event timing (event_elapsed_ms is optional) is timed the old way: a synchronize after each pass.
#pragma once

#include <string>
#include <vector>

#include "h2/device.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/stream.hpp"

namespace h2::heteropp {

class PassTimer {
 public:
  explicit PassTimer(const Device& device);

  // At the start of a step, with nothing queued on `stream` that the step should not count.
  void begin_step(Stream& stream);
  // Around the work of one pass enqueued on `stream`.
  void start(Stream& stream);
  void stop(Stream& stream, std::string name, int micro_batch);
  // Waits for the step's passes, adds them to `timeline` ("compute") and returns their total
  // seconds on the device.
  double finish_step(Timeline& timeline);

 private:
  struct Pass {
    std::string name;
    int micro_batch;
    Timeline::Clock::time_point host_start, host_end;  // without event timing
  };
  Event& event(size_t index);

  Device device_;
  bool use_events_;
  std::vector<Event> events_;  // reused step after step: [anchor, start 0, end 0, start 1, ...]
  std::vector<Pass> passes_;
  Timeline::Clock::time_point anchor_time_;
  Timeline::Clock::time_point pending_start_;
};

}  // namespace h2::heteropp
