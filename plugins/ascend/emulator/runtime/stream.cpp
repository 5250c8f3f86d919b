#include "stream.hpp"

#include "emulator.hpp"
#include "machine.hpp"

namespace ascend_emulator {

Stream::Stream(Machine& machine, int32_t device) : machine_(machine), device_(device), worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void Stream::enqueue(std::string name, std::function<void()> task, bool device_work) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(Task{std::move(name), std::move(task), device_work});
    ++enqueued_;
  }
  changed_.notify_all();
}

void Stream::synchronize() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return completed_ >= target; });
  if (error_code_ != ACL_SUCCESS) throw Error(error_code_, error_message_);
}

bool Stream::idle() const {
  std::lock_guard lock(mutex_);
  return completed_ == enqueued_;
}

std::optional<uint64_t> Stream::subscriber() const {
  std::lock_guard lock(mutex_);
  return subscriber_;
}

void Stream::set_subscriber(std::optional<uint64_t> thread_id) {
  std::lock_guard lock(mutex_);
  subscriber_ = thread_id;
}

void Stream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and every task has run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    const std::string& name = task.name;
    lock.unlock();
    aclError code = ACL_SUCCESS;
    std::string message;
    try {
      if (task.device_work) machine_.before_task(name);
      task.run();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      code = ACL_ERROR_RT_INTERNAL_ERROR;
      message = e.what();
    }
    lock.lock();
    if (code != ACL_SUCCESS && error_code_ == ACL_SUCCESS) {
      error_code_ = code;
      error_message_ = "task '" + name + "' on a stream of device " + std::to_string(device_) + " failed: " + message;
    }
    ++completed_;
    changed_.notify_all();
  }
}

}  // namespace ascend_emulator
