#include "parallel.hpp"

#include <algorithm>
#include <utility>

namespace h2::cpu_reference {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_chunks() {
  std::unique_lock lock(mutex_);
  while (next_ < chunks_) {
    const int64_t chunk = next_++;
    const auto* body = body_;
    const int64_t begin = chunk * chunk_;
    const int64_t end = std::min(n_, begin + chunk_);
    lock.unlock();
    std::exception_ptr error;
    try {
      (*body)(begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (++finished_ == chunks_) done_.notify_all();
  }
}

void ThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  const int64_t chunk = std::max<int64_t>(grain, (n + threads() - 1) / threads());
  if (workers_.empty() || chunk >= n) {
    body(0, n);
    return;
  }
  std::lock_guard job(job_mutex_);
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    n_ = n;
    chunk_ = chunk;
    chunks_ = (n + chunk - 1) / chunk;
    next_ = 0;
    finished_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ == chunks_; });
  body_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace h2::cpu_reference
