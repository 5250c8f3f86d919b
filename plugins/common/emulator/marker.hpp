// An emulated event (AscendCL's aclrtEvent, CNRT's notifier): placing it on a queue captures the work
// queued so far; it completes when the queue reaches it. A wait holds the record it saw, so a later
// placement of the same marker never releases it. A marker never placed counts as complete.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "task_queue.hpp"

namespace h2::emulator {

// Held by shared_ptr: a placement or wait in a queue keeps its marker alive.
class Marker : public std::enable_shared_from_this<Marker> {
 public:
  Marker(int32_t device, bool timing) : device_(device), timing_(timing) {}
  int32_t device() const { return device_; }
  bool timing() const { return timing_; }

  // Captures the work queued on `queue` so far (a task named `name` marks the point).
  void place(TaskQueue& queue, const char* name);
  // Whether the latest placement has completed (true when never placed).
  bool complete() const;
  // Blocks the host until the latest placement has completed.
  void wait() const;
  // Makes `queue`'s later work wait for the latest placement (nothing when never placed).
  void enqueue_wait(TaskQueue& queue, const char* name);

  enum class State { never_placed, pending, done };
  // The latest placement's state and, when done, when it completed.
  State state(std::chrono::steady_clock::time_point* done_at) const;

 private:
  struct Record {
    bool done = false;
    std::chrono::steady_clock::time_point done_at{};
  };
  int32_t device_;
  bool timing_;
  mutable std::mutex mutex_;
  mutable std::condition_variable record_done_;
  std::shared_ptr<Record> latest_;  // NULL: never placed
};

}  // namespace h2::emulator
