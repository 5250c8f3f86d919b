// Streams and events of the cpu-reference plugin.
//
// Each stream is one worker thread draining an in-order queue, so asynchronous bugs in framework
// code (a read before the copy finished, a missing event wait) show up on a CPU as they would on a
// GPU. An event record enqueues a Marker; the marker completes, with a timestamp, when the worker
// reaches it. Waits capture the marker of the most recent record, so re-recording an event never
// releases a wait that was enqueued earlier (CUDA's semantics).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "h2/plugin_abi.h"

namespace h2::cpu_reference {

class Marker {
 public:
  void complete();
  void wait();
  bool done();
  std::chrono::steady_clock::time_point completed_at();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::chrono::steady_clock::time_point completed_at_;
};

class Stream {
 public:
  // A blocking stream runs each task on the calling thread before enqueue returns (like
  // CUDA_LAUNCH_BLOCKING=1): for debugging, to time the host side of a call without a handoff, and
  // for streams created with H2_STREAM_HOST_INLINE.
  Stream(int device, bool blocking);
  ~Stream();  // drains the queue and joins the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }

  // Enqueues work that reads or writes memory. It may throw PluginError; the first failure becomes
  // the stream's sticky error and later memory work on the stream is skipped.
  void enqueue(std::function<void()> work);
  // Enqueues ordering work (event markers, waits) that runs even after an error, so nothing that
  // depends on this stream's progress can hang.
  void enqueue_ordering(std::function<void()> work);

  // Completes `marker` once everything enqueued so far has finished: at once when the stream is idle.
  void enqueue_marker(const std::shared_ptr<Marker>& marker);

  // Blocks until everything enqueued so far has finished; throws the sticky error if any.
  void synchronize();
  // Blocks until everything enqueued so far has finished, without reporting errors.
  void wait_idle();
  // H2_STATUS_OK when idle, H2_STATUS_NOT_READY while a task is queued or running; throws the
  // sticky error if any.
  H2_Status query();

 private:
  struct Task {
    std::function<void()> work;
    bool ordering;
  };
  void push(Task task);
  void run();
  // Runs one task (skipped after a sticky error unless it orders); `lock` holds mutex_ on entry and exit.
  void execute(Task& task, std::unique_lock<std::mutex>& lock);
  void throw_if_failed();  // requires mutex_ held

  int device_;
  bool blocking_;
  std::mutex blocking_order_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::deque<Task> queue_;
  size_t pending_ = 0;  // queued plus running: query must not report idle while a task runs
  bool stopping_ = false;
  std::optional<std::pair<H2_Status, std::string>> error_;
  std::thread worker_;
};

class Event {
 public:
  Event(int device, bool timing) : device_(device), timing_(timing) {}
  int device() const { return device_; }
  bool timing() const { return timing_; }

  void record(Stream& stream);
  // The marker of the most recent record, or nullptr when never recorded.
  std::shared_ptr<Marker> latest();

 private:
  int device_;
  bool timing_;
  std::mutex mutex_;
  std::shared_ptr<Marker> latest_;
};

}  // namespace h2::cpu_reference
