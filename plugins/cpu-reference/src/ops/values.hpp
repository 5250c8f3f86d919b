// The fp64 arrays the reference's kernels compute in (load, compute, store once rounded). Their
// memory is kept per thread and reused: a kernel call allocates a few such arrays, often megabytes,
// and glibc hands blocks that large straight back to the system when they are freed, so every call
// took fresh pages, each costing a page fault on first touch (several microseconds in a VM). Whether
// it did depended on what else had been allocated before (glibc raises its threshold for returning
// memory as large blocks come and go): a training step ran 35% slower after one kernel stopped
// allocating a large temporary array.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace h2::cpu_reference {

namespace detail {
// Blocks of at least kSmallest bytes, by power-of-two size, freed by this thread and not yet reused.
void* take_block(size_t bytes);
bool keep_block(void* block, size_t bytes);  // false: not kept (too small, or the cache is full)
constexpr size_t kSmallest = size_t{64} << 10;
size_t block_size(size_t bytes);  // the power of two a request of `bytes` is served with
}  // namespace detail

// Arrays start on a cache line: a kernel's vector loads then never straddle two lines. With glibc's
// 16-byte alignment where an array started depended on everything allocated before it, and the gemm
// kernel ran 4% slower or faster after unrelated changes elsewhere in the process (issue 28).
constexpr std::align_val_t kValuesAlignment{64};

template <typename T>
struct ReusedAllocator {
  using value_type = T;
  ReusedAllocator() = default;
  template <typename U>
  ReusedAllocator(const ReusedAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < detail::kSmallest) return static_cast<T*>(::operator new(bytes, kValuesAlignment));
    if (void* block = detail::take_block(bytes)) return static_cast<T*>(block);
    return static_cast<T*>(::operator new(detail::block_size(bytes), kValuesAlignment));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= detail::kSmallest && detail::keep_block(p, bytes)) return;
    ::operator delete(p, kValuesAlignment);
  }
  template <typename U>
  bool operator==(const ReusedAllocator<U>&) const {
    return true;
  }
};

using Values = std::vector<double, ReusedAllocator<double>>;

}  // namespace h2::cpu_reference
