// The live handles (streams, events) a plugin has handed out, so that a stale, destroyed or foreign
// handle is an INVALID_ARGUMENT error naming what it should have been, never a crash. Objects are
// shared: a call that looked one up keeps it alive while another thread destroys the handle.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin_error.hpp"

namespace h2::plugin {

template <typename Handle, typename Object>
class HandleRegistry {
 public:
  explicit HandleRegistry(const char* what) : what_(what) {}

  // Registers `object`; its handle is its address.
  Handle* add(std::shared_ptr<Object> object) {
    auto* handle = reinterpret_cast<Handle*>(object.get());
    std::lock_guard lock(mutex_);
    objects_.emplace(handle, std::move(object));
    return handle;
  }

  std::shared_ptr<Object> get(Handle* handle) const {
    std::lock_guard lock(mutex_);
    return find(objects_, handle)->second;
  }

  // Unregisters `handle` and returns its object, which the caller tears down outside the lock.
  std::shared_ptr<Object> take(Handle* handle) {
    std::lock_guard lock(mutex_);
    auto it = find(objects_, handle);
    std::shared_ptr<Object> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }

  std::vector<std::shared_ptr<Object>> snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<Object>> all;
    for (const auto& [handle, object] : objects_) all.push_back(object);
    return all;
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return objects_.size();
  }

  void clear() {
    std::lock_guard lock(mutex_);
    objects_.clear();
  }

 private:
  // `Map` is the map or its const view, so the iterator is mutable where the caller may move from it.
  template <typename Map>
  auto find(Map& objects, Handle* handle) const {
    auto it = objects.find(handle);
    if (it == objects.end())
      fail(H2_STATUS_INVALID_ARGUMENT, std::string("not a live ") + what_ + " of this plugin (destroyed?)");
    return it;
  }

  const char* what_;
  mutable std::mutex mutex_;
  std::map<Handle*, std::shared_ptr<Object>> objects_;
};

}  // namespace h2::plugin
