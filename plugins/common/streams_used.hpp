// The streams a communicator's work was issued to, so that an abort can fail each of them with its
// reason (NCCL's and HCCL's communicators do not know the streams they ran on). Thread-safe.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

namespace h2::plugin {

template <typename Stream>
class StreamsUsed {
 public:
  // Remembers `stream` (once), forgetting streams destroyed meanwhile.
  void add(const std::shared_ptr<Stream>& stream) {
    std::lock_guard lock(mutex_);
    std::erase_if(streams_, [](const std::weak_ptr<Stream>& s) { return s.expired(); });
    const bool known = std::any_of(streams_.begin(), streams_.end(),
                                   [&](const std::weak_ptr<Stream>& s) { return s.lock() == stream; });
    if (!known) streams_.push_back(stream);
  }

  // Calls `mark(stream)` for every stream remembered that still exists.
  template <typename Mark>
  void for_each(const Mark& mark) {
    std::lock_guard lock(mutex_);
    for (const auto& weak : streams_)
      if (auto stream = weak.lock()) mark(*stream);
  }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<Stream>> streams_;
};

}  // namespace h2::plugin
