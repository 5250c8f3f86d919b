#include "task_queue.hpp"

namespace h2::emulator {

TaskQueue::TaskQueue(int32_t device, std::function<void(const std::string&)> before_device_work, int internal_code)
    : device_(device),
      before_device_work_(std::move(before_device_work)),
      internal_code_(internal_code),
      worker_([this] { run(); }) {}

TaskQueue::~TaskQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void TaskQueue::enqueue(std::string name, std::function<void()> task, bool device_work) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(Task{std::move(name), std::move(task), device_work});
    ++enqueued_;
  }
  changed_.notify_all();
}

void TaskQueue::synchronize() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return completed_ >= target; });
  if (error_code_ != 0) throw Error(error_code_, error_message_);
}

bool TaskQueue::idle() const {
  std::lock_guard lock(mutex_);
  return completed_ == enqueued_;
}

int TaskQueue::error_code() const {
  std::lock_guard lock(mutex_);
  return error_code_;
}

void TaskQueue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and every task has run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    const std::string& name = task.name;
    lock.unlock();
    int code = 0;
    std::string message;
    try {
      if (task.device_work) before_device_work_(name);
      task.run();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      code = internal_code_;
      message = e.what();
    }
    lock.lock();
    if (code != 0 && error_code_ == 0) {
      error_code_ = code;
      error_message_ = "task '" + name + "' on a queue of device " + std::to_string(device_) + " failed: " + message;
    }
    ++completed_;
    changed_.notify_all();
  }
}

}  // namespace h2::emulator
