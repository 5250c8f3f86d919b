#include "stream.hpp"

#include <pthread.h>

#include "common.hpp"
#include "ops/planted_defects.hpp"

namespace h2::cpu_reference {

void Marker::complete() {
  {
    std::lock_guard lock(mutex_);
    completed_at_ = std::chrono::steady_clock::now();
    done_ = true;
  }
  cv_.notify_all();
}

void Marker::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool Marker::done() {
  std::lock_guard lock(mutex_);
  return done_;
}

std::chrono::steady_clock::time_point Marker::completed_at() {
  std::lock_guard lock(mutex_);
  return completed_at_;
}

Stream::Stream(int device, bool blocking) : device_(device), blocking_(blocking) {
  if (blocking_) return;  // work runs on the caller's thread; no worker
  worker_ = std::thread([this] { run(); });
  std::string name = "h2cpu-dev" + std::to_string(device);
  pthread_setname_np(worker_.native_handle(), name.substr(0, 15).c_str());
}

Stream::~Stream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Stream::enqueue(std::function<void()> work) {
  push({std::move(work), false});
}

void Stream::enqueue_ordering(std::function<void()> work) {
  push({std::move(work), true});
}

void Stream::push(Task task) {
  if (blocking_) {
    // One task at a time, in call order, even when several host threads share the stream.
    std::lock_guard order(blocking_order_);
    std::unique_lock lock(mutex_);
    ++pending_;
    execute(task, lock);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
    ++pending_;
  }
  work_ready_.notify_one();
}

void Stream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left to do
    Task task = std::move(queue_.front());
    queue_.pop_front();
    execute(task, lock);
  }
}

void Stream::execute(Task& task, std::unique_lock<std::mutex>& lock) {
  const bool skip = error_.has_value() && !task.ordering;
  lock.unlock();

  std::optional<std::pair<H2_Status, std::string>> failure;
  if (!skip) {
    try {
      task.work();
    } catch (const PluginError& e) {
      failure.emplace(e.status(), e.what());
    } catch (const std::exception& e) {
      failure.emplace(H2_STATUS_INTERNAL, e.what());
    }
  }
  task.work = nullptr;  // release captured state before reporting completion

  lock.lock();
  if (failure && !error_) error_ = std::move(failure);
  if (--pending_ == 0) idle_.notify_all();
}

void Stream::throw_if_failed() {
  if (error_) fail(error_->first, "earlier asynchronous work on the stream failed: " + error_->second);
}

void Stream::synchronize() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return pending_ == 0; });
  throw_if_failed();
}

void Stream::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return pending_ == 0; });
}

H2_Status Stream::query() {
  std::lock_guard lock(mutex_);
  throw_if_failed();
  return pending_ == 0 ? H2_STATUS_OK : H2_STATUS_NOT_READY;
}

void Stream::enqueue_marker(const std::shared_ptr<Marker>& marker) {
  {
    std::lock_guard lock(mutex_);
    if (pending_ == 0 || (planted_defect() == Defect::early_event && queue_.empty())) {
      // Nothing to wait for: complete now rather than wake the worker for it. Each wake-up is a
      // context switch, and DiComm records several events per message.
      marker->complete();
      return;
    }
  }
  enqueue_ordering([marker] { marker->complete(); });
}

void Event::record(Stream& stream) {
  auto marker = std::make_shared<Marker>();
  // The marker takes its place in the stream before waits can capture it. On a blocking stream the
  // enqueue may itself wait behind another thread's task; had the marker been published first, a
  // wait enqueued on that same stream by a third thread could capture it and run first, waiting for
  // a marker that can only complete after it: a deadlock. Until then waits capture the previous
  // record, as if they had come before this one.
  stream.enqueue_marker(marker);
  std::lock_guard lock(mutex_);
  latest_ = marker;
}

std::shared_ptr<Marker> Event::latest() {
  std::lock_guard lock(mutex_);
  return latest_;
}

}  // namespace h2::cpu_reference
