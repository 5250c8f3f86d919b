// The bookkeeping of an accelerator plugin's memory that the vendor runtime does not answer itself:
// every live device allocation (so a pointer of another plugin, an interior pointer or a freed one is
// an error naming it rather than a fault in the runtime; operators describe tensors from their
// allocation's start), every page-locked host allocation, and the blocks mem_free_async gave back,
// which are reusable at once on the stream that freed them and on another stream once it waits for
// the event recorded at the free (the ABI 1.4 stream-ordered slots for runtimes without a
// stream-ordered allocator). Thread-safe; `Event` is the vendor's event handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h2::plugin {

// A live device allocation of the plugin (or memory imported from another process).
struct Allocation {
  int32_t device;
  size_t bytes;
  std::string ipc_key = {};  // set once exported, or for an import
  bool imported = false;     // from another process: closed by mem_close, not freed
};

// The entry of `ranges` (start address -> entry) whose range holds `address`, or end().
template <typename Map, typename Bytes>
auto range_holding(Map& ranges, const char* address, Bytes bytes_of) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return address < it->first + bytes_of(it->second) ? it : ranges.end();
}

template <typename Event>
class AllocationBook {
 public:
  // A block given back by mem_free_async, with the event recorded where it was freed.
  struct FreedBlock {
    void* ptr;
    int32_t device;
    size_t bytes;
    uint64_t stream_id;
    Event freed;
  };

  std::mutex& mutex() const { return mutex_; }  // guards what the *_locked calls return

  void add(const void* ptr, Allocation allocation) {
    std::lock_guard lock(mutex_);
    allocations_.emplace(static_cast<const char*>(ptr), std::move(allocation));
  }
  // The allocation starting at `ptr`, or nullptr; hold mutex() while using it.
  Allocation* starting_at_locked(const void* ptr) {
    auto it = allocations_.find(static_cast<const char*>(ptr));
    return it == allocations_.end() ? nullptr : &it->second;
  }
  // The allocation holding `ptr` and its start, or {nullptr, nullptr}; hold mutex().
  std::pair<const char*, Allocation*> holding_locked(const void* ptr) {
    auto it = range_holding(allocations_, static_cast<const char*>(ptr), bytes_of);
    if (it == allocations_.end()) return {nullptr, nullptr};
    return {it->first, &it->second};
  }
  void erase_locked(const void* ptr) { allocations_.erase(static_cast<const char*>(ptr)); }

  // Whether [ptr, ptr + bytes) lies inside one live allocation.
  bool contains(const void* ptr, size_t bytes) const {
    const char* address = static_cast<const char*>(ptr);
    std::lock_guard lock(mutex_);
    const auto it = range_holding(allocations_, address, bytes_of);
    return it != allocations_.end() && address + bytes <= it->first + it->second.bytes;
  }
  // The live allocation holding `ptr`: its start and size, or {nullptr, 0}.
  std::pair<const char*, size_t> allocation_of(const void* ptr) const {
    std::lock_guard lock(mutex_);
    const auto it = range_holding(allocations_, static_cast<const char*>(ptr), bytes_of);
    if (it == allocations_.end()) return {nullptr, 0};
    return {it->first, it->second.bytes};
  }

  void add_host(const void* ptr, size_t bytes) {
    std::lock_guard lock(mutex_);
    host_allocations_.emplace(static_cast<const char*>(ptr), bytes);
  }
  bool erase_host(const void* ptr) {
    std::lock_guard lock(mutex_);
    return host_allocations_.erase(static_cast<const char*>(ptr)) != 0;
  }
  bool contains_host(const void* ptr, size_t bytes) const {
    const char* address = static_cast<const char*>(ptr);
    std::lock_guard lock(mutex_);
    const auto it = range_holding(host_allocations_, address, [](size_t size) { return size; });
    return it != host_allocations_.end() && address + bytes <= it->first + it->second;
  }

  // Records a block mem_free_async gave back; the caller has erased its allocation.
  void add_freed_locked(FreedBlock block) { freed_.push_back(std::move(block)); }
  // A freed block of exactly `bytes` on `device`, taken back as a live allocation; nullopt if none.
  std::optional<FreedBlock> reuse(int32_t device, size_t bytes) {
    std::lock_guard lock(mutex_);
    for (auto it = freed_.begin(); it != freed_.end(); ++it) {
      if (it->device != device || it->bytes != bytes) continue;
      FreedBlock block = *it;
      freed_.erase(it);
      allocations_.emplace(static_cast<const char*>(block.ptr), Allocation{device, bytes});
      return block;
    }
    return std::nullopt;
  }
  // Removes and returns the freed blocks of `device` for which `done(block)` holds.
  template <typename Done>
  std::vector<FreedBlock> take_freed(int32_t device, Done done) {
    std::vector<FreedBlock> taken;
    std::lock_guard lock(mutex_);
    for (auto it = freed_.begin(); it != freed_.end();) {
      if (it->device == device && done(*it)) {
        taken.push_back(*it);
        it = freed_.erase(it);
      } else {
        ++it;
      }
    }
    return taken;
  }

 private:
  static size_t bytes_of(const Allocation& allocation) { return allocation.bytes; }

  mutable std::mutex mutex_;
  std::map<const char*, Allocation> allocations_;  // by start address
  std::vector<FreedBlock> freed_;                  // oldest first
  std::map<const char*, size_t> host_allocations_;
};

}  // namespace h2::plugin
