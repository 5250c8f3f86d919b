// The memory half of an accelerator plugin whose vendor runtime has malloc, free and events but no
// stream-ordered allocator (AscendCL, CNRT), written once for such plugins. It keeps the allocation
// book (allocation_book.hpp) and implements the ABI's memory slots on the vendor calls the plugin's
// runtime (`Derived`) provides:
//
// - mem_alloc, mem_free: the vendor's malloc and free; free does not wait for queued work, the ABI's
//   mem_free does (it waits for the device's streams first).
// - mem_alloc_async, mem_free_async (ABI 1.4): a freed block is kept with an event recorded where it
//   was freed; the same stream reuses it at once, another stream after waiting for the event on the
//   device (never a host wait); the blocks go back to the vendor when their events have completed or
//   when memory runs out (then the allocation is retried once).
// - host_alloc, host_free: page-locked memory; host_free waits for every stream.
//
// `Derived` provides, as members this class calls:
//   void bind(int32_t device) const; void check_device(int32_t device) const;
//   std::string device_name(int32_t device) const;
//   void memory_info(int32_t device, uint64_t& free_bytes, uint64_t& total_bytes) const;
//   bool vendor_malloc(size_t bytes, void** ptr, std::string& why);  // false: out of memory (why)
//   void vendor_free(void* ptr);
//   void* vendor_host_malloc(size_t bytes);                          // nullptr: out of memory
//   void vendor_host_free(void* ptr);
//   Event event_create(); void event_destroy(Event) noexcept; void event_record(Event, Stream&);
//   bool event_done(Event) noexcept; void event_wait(Event) noexcept;
//   void stream_wait(Stream&, Event);
//   void wait_for_streams(int32_t device);  // kAllDevices: every device's
//   void before_free(Allocation&);          // e.g. close an export key (under the book's lock)
// `Stream` has `device` and `id` (never reused).
#pragma once

#include <cstdint>
#include <string>

#include "allocation_book.hpp"
#include "plugin_error.hpp"

namespace h2::plugin {

template <typename Derived, typename Stream, typename Event>
class EventMemory {
 public:
  static constexpr int32_t kAllDevices = -1;

  void* allocate(int32_t device, size_t bytes) {
    self().check_device(device);
    if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
    return malloc_or_reclaim(device, bytes);
  }

  void release(int32_t device, void* ptr) {
    self().check_device(device);
    {
      std::lock_guard lock(book_.mutex());
      Allocation* allocation = book_.starting_at_locked(ptr);
      if (allocation == nullptr || allocation->device != device || allocation->imported)
        fail(H2_STATUS_INVALID_ARGUMENT,
             "the pointer is not a live allocation of device " + std::to_string(device) +
                 (allocation != nullptr && allocation->imported ? " (imported: mem_close it)" : ""));
      self().before_free(*allocation);
      book_.erase_locked(ptr);
    }
    self().wait_for_streams(device);
    self().bind(device);
    self().vendor_free(ptr);
  }

  void* allocate_async(int32_t device, size_t bytes, Stream& stream) {
    self().check_device(device);
    if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
    if (stream.device != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to device " + std::to_string(stream.device) +
                                           ", the allocation to device " + std::to_string(device));
    self().bind(device);
    if (auto block = book_.reuse(device, bytes)) {
      if (block->stream_id != stream.id) self().stream_wait(stream, block->freed);
      self().event_destroy(block->freed);
      return block->ptr;
    }
    release_freed_blocks(device, false);
    return malloc_or_reclaim(device, bytes);
  }

  void release_async(int32_t device, void* ptr, Stream& stream) {
    self().check_device(device);
    if (stream.device != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to device " + std::to_string(stream.device) +
                                           ", the memory to device " + std::to_string(device));
    self().bind(device);
    const Event freed = self().event_create();
    std::lock_guard lock(book_.mutex());
    Allocation* allocation = book_.starting_at_locked(ptr);
    try {
      if (allocation == nullptr || allocation->device != device || allocation->imported)
        fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not a live allocation of device " + std::to_string(device));
      self().before_free(*allocation);
      self().event_record(freed, stream);
    } catch (...) {
      self().event_destroy(freed);
      throw;
    }
    book_.add_freed_locked({ptr, device, allocation->bytes, stream.id, freed});
    book_.erase_locked(ptr);
  }

  // Whether [ptr, ptr + bytes) lies inside one live allocation of this plugin (of any device).
  bool is_device_memory(const void* ptr, size_t bytes) const { return book_.contains(ptr, bytes); }
  // The live allocation holding `ptr`: its start and size (the operators describe tensors from it).
  std::pair<const char*, size_t> allocation_of(const void* ptr) const {
    const auto found = book_.allocation_of(ptr);
    if (found.first == nullptr)
      fail(H2_STATUS_INVALID_ARGUMENT, "a tensor's data is not inside a live allocation of this plugin");
    return found;
  }

  void* allocate_host(size_t bytes) {
    if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
    void* ptr = self().vendor_host_malloc(bytes);
    if (ptr == nullptr)
      fail(H2_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of page-locked host memory");
    book_.add_host(ptr, bytes);
    return ptr;
  }

  void release_host(void* ptr) {
    if (!book_.erase_host(ptr))
      fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not page-locked memory from this plugin's host_alloc");
    self().wait_for_streams(kAllDevices);
    self().vendor_host_free(ptr);
  }
  // Whether [ptr, ptr + bytes) lies inside one host_alloc allocation (page-locked memory).
  bool is_host_allocation(const void* ptr, size_t bytes) const { return book_.contains_host(ptr, bytes); }

 protected:
  // Gives the blocks mem_free_async returned on `device` back to the vendor: those whose free has
  // completed, or with `wait` all of them after waiting for their streams.
  void release_freed_blocks(int32_t device, bool wait) {
    const auto done =
        book_.take_freed(device, [&](const auto& block) { return wait || self().event_done(block.freed); });
    if (done.empty()) return;
    self().bind(device);
    for (const auto& block : done) {
      if (wait) self().event_wait(block.freed);
      self().event_destroy(block.freed);
      self().vendor_free(block.ptr);
    }
  }

  AllocationBook<Event> book_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }

  // The vendor's malloc, and when the device is full, once more after giving back the blocks that
  // mem_free_async returned (waiting for the streams that freed them).
  void* malloc_or_reclaim(int32_t device, size_t bytes) {
    self().bind(device);
    void* ptr = nullptr;
    std::string why;
    if (!self().vendor_malloc(bytes, &ptr, why)) {
      release_freed_blocks(device, true);
      if (!self().vendor_malloc(bytes, &ptr, why)) out_of_memory(device, bytes, why);
    }
    book_.add(ptr, Allocation{device, bytes});
    return ptr;
  }

  [[noreturn]] void out_of_memory(int32_t device, size_t bytes, const std::string& runtime_message) {
    uint64_t free_bytes = 0, total_bytes = 0;
    self().memory_info(device, free_bytes, total_bytes);
    fail(H2_STATUS_OUT_OF_MEMORY, "device " + std::to_string(device) + " (" + self().device_name(device) +
                                      ") cannot allocate " + std::to_string(bytes) +
                                      " bytes: " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                                      " bytes are free (" + runtime_message + ")");
  }
};

}  // namespace h2::plugin
