// An emulated aclrtStream: the emulators' task queue (tasks run in order on a worker thread; a
// task's error is kept and the stream goes on, CANN's default "continue on error" mode), plus the
// thread aclrtSubscribeReport bound to it for host callbacks.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "task_queue.hpp"

namespace ascend_emulator {

class Machine;

class Stream : public h2::emulator::TaskQueue {
 public:
  Stream(Machine& machine, int32_t device);
  ~Stream() override = default;

  std::optional<uint64_t> subscriber() const {
    std::lock_guard lock(subscriber_mutex_);
    return subscriber_;
  }
  void set_subscriber(std::optional<uint64_t> thread_id) {
    std::lock_guard lock(subscriber_mutex_);
    subscriber_ = thread_id;
  }

 private:
  mutable std::mutex subscriber_mutex_;
  std::optional<uint64_t> subscriber_;
};

}  // namespace ascend_emulator
