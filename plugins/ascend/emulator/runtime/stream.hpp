// An emulated aclrtStream: a worker thread that runs the stream's tasks (copies, kernels, event
// records, waits, callbacks) in order, asynchronously to the thread that enqueued them, as the
// device's task scheduler does. A task's Error is kept as the stream's error (the stream goes on
// with later tasks, CANN's default "continue on error" mode) and reported by synchronize.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ascend/acl_runtime.h"

namespace ascend_emulator {

class Machine;

class Stream {
 public:
  Stream(Machine& machine, int32_t device);
  ~Stream();  // finishes the queued tasks, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device() const { return device_; }
  // `device_work`: a copy or kernel, which fault injection may fail; event records, waits and
  // callbacks are not (so that nothing waiting on them hangs once the device is lost).
  void enqueue(std::string name, std::function<void()> task, bool device_work = true);
  // Waits for every task enqueued so far; throws the stream's error, if any (it stays).
  void synchronize();
  bool idle() const;

  // The thread aclrtSubscribeReport bound to this stream, for its callbacks.
  std::optional<uint64_t> subscriber() const;
  void set_subscriber(std::optional<uint64_t> thread_id);

 private:
  void run();

  Machine& machine_;
  int32_t device_;
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
  aclError error_code_ = ACL_SUCCESS;
  std::string error_message_;
  std::optional<uint64_t> subscriber_;
  std::thread worker_;
};

}  // namespace ascend_emulator
