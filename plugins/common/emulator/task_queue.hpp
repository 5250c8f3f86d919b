// An emulated stream or queue: a worker thread that runs its tasks (copies, kernels, event records,
// waits, host callbacks) in order, asynchronously to the thread that enqueued them, as a device's
// task scheduler does. A task's Error becomes the queue's sticky error (the queue goes on with later
// tasks) and is reported by synchronize.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "emulator_error.hpp"

namespace h2::emulator {

class TaskQueue {
 public:
  // `before_device_work(name)` runs before every copy or kernel (fault injection and counting);
  // `internal_code` is the error code of a task that threw something other than Error.
  TaskQueue(int32_t device, std::function<void(const std::string&)> before_device_work, int internal_code);
  virtual ~TaskQueue();  // finishes the queued tasks, then stops the worker
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  int32_t device() const { return device_; }
  // `device_work`: a copy or kernel, which fault injection may fail; event records, waits and
  // callbacks are not (so that nothing waiting on them hangs once the device is lost).
  void enqueue(std::string name, std::function<void()> task, bool device_work = true);
  // Waits for every task enqueued so far; throws the queue's error, if any (it stays).
  void synchronize();
  bool idle() const;
  // The queue's sticky error code, 0 while it has none.
  int error_code() const;

 private:
  void run();

  int32_t device_;
  std::function<void(const std::string&)> before_device_work_;
  int internal_code_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  struct Task {
    std::string name;
    std::function<void()> run;
    bool device_work;
  };
  std::deque<Task> tasks_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  int error_code_ = 0;
  std::string error_message_;
  std::thread worker_;  // last: it starts once everything above is ready
};

}  // namespace h2::emulator
