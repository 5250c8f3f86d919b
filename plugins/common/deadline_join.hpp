// Joining a vendor communicator whose library takes no timeout (HCCL's HcclCommInitRootInfo waits
// HCCL_CONNECT_TIMEOUT, CNCL's cnclInitComms as long as it takes), within the ABI's `timeout_ms`: the
// join runs on a helper thread and the caller waits for it until the deadline. A join that ends after
// the caller gave up is undone on that thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "plugin_error.hpp"

namespace h2::plugin {

// Runs `join(handle)` (returning the library's code, `success` when it made `handle`) on a helper
// thread. Returns the code once it has returned, with `handle` set; throws PluginError(DEVICE_ERROR,
// `late`) when `timeout` passes first, and then a join that still succeeds is passed to `undo`.
// `join` and `undo` must stay callable after this returns (use only never-unloaded libraries).
template <typename Handle>
int join_by_deadline(std::chrono::milliseconds timeout, int success, std::function<int(Handle&)> join,
                     std::function<void(Handle)> undo, Handle& handle, const std::string& late) {
  struct Join {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false, abandoned = false;
    int code = 0;
    Handle made{};
  };
  auto state = std::make_shared<Join>();
  std::thread([state, success, join = std::move(join), undo = std::move(undo)] {
    Handle made{};
    const int code = join(made);
    std::lock_guard lock(state->mutex);
    if (state->abandoned) {
      if (code == success) undo(made);
      return;
    }
    state->code = code;
    state->made = made;
    state->done = true;
    state->done_cv.notify_all();
  }).detach();
  std::unique_lock lock(state->mutex);
  if (!state->done_cv.wait_for(lock, timeout, [&] { return state->done; })) {
    state->abandoned = true;
    fail(H2_STATUS_DEVICE_ERROR, late);
  }
  handle = state->made;
  return state->code;
}

}  // namespace h2::plugin
