#include "marker.hpp"

namespace h2::emulator {

void Marker::place(TaskQueue& queue, const char* name) {
  auto record = std::make_shared<Record>();
  {
    std::lock_guard lock(mutex_);
    latest_ = record;
  }
  queue.enqueue(
      name,
      [self = shared_from_this(), record] {
        std::lock_guard lock(self->mutex_);
        record->done = true;
        record->done_at = std::chrono::steady_clock::now();
        self->record_done_.notify_all();
      },
      false);
}

bool Marker::complete() const {
  std::lock_guard lock(mutex_);
  return latest_ == nullptr || latest_->done;
}

void Marker::wait() const {
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Record> record = latest_;
  if (record) record_done_.wait(lock, [&] { return record->done; });
}

void Marker::enqueue_wait(TaskQueue& queue, const char* name) {
  std::shared_ptr<Record> record;
  {
    std::lock_guard lock(mutex_);
    record = latest_;
  }
  if (!record) return;
  queue.enqueue(
      name,
      [self = shared_from_this(), record] {
        std::unique_lock lock(self->mutex_);
        self->record_done_.wait(lock, [&] { return record->done; });
      },
      false);
}

Marker::State Marker::state(std::chrono::steady_clock::time_point* done_at) const {
  std::lock_guard lock(mutex_);
  if (!latest_) return State::never_placed;
  if (!latest_->done) return State::pending;
  if (done_at) *done_at = latest_->done_at;
  return State::done;
}

}  // namespace h2::emulator
