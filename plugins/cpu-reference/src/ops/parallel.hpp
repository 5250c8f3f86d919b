// A small thread pool for the reference's kernels. parallel_for splits [0, n) into contiguous
// chunks; every output element is computed by exactly one chunk in a fixed order, so results are
// bit-identical whatever the number of threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace h2::cpu_reference {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; the caller of run() is one of them
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) over chunks covering [0, n), each at least `grain` long, and returns
  // when all are done. The first exception thrown by a chunk is rethrown here.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

 private:
  void work();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;  // one parallel_for at a time; a second caller waits
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, finished_ = 0, chunks_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace h2::cpu_reference
