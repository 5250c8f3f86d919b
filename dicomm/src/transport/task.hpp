// An operation the progress engine moves along step by step (a point-to-point transfer, one step
// of a collective): it posts fabric operations, enqueues device copies and reductions, and reacts
// to their completions. Both the thread waiting for it and the engine's background thread advance
// it, always under the engine's lock, so a task needs no lock of its own.
#pragma once

#include <atomic>
#include <string>

namespace h2::dicomm::detail {

class Task {
 public:
  virtual ~Task() = default;
  // Moves the task along; true when anything changed. Exceptions mark the task failed.
  virtual bool advance() = 0;
  // What it is, for timeout messages: "allreduce step 2/6: receive piece 3/8 from rank 1".
  virtual std::string describe() const = 0;

  bool finished() const { return state_.load(std::memory_order_acquire) != 0; }
  bool failed() const { return state_.load(std::memory_order_acquire) == 2; }
  const std::string& error() const { return error_; }
  int error_peer() const { return error_peer_; }

  void finish() { state_.store(1, std::memory_order_release); }
  void fail(const std::string& error, int peer) {
    error_ = error;
    error_peer_ = peer;
    state_.store(2, std::memory_order_release);
  }

 private:
  std::atomic<int> state_{0};  // 0 running, 1 done, 2 failed
  std::string error_;
  int error_peer_ = -1;
};

}  // namespace h2::dicomm::detail
