#include "values.hpp"

#include <bit>
#include <cstdint>
#include <map>

namespace h2::cpu_reference::detail {

namespace {

// A thread's freed blocks. Bounded, so a kernel that once needed a huge array does not pin its
// memory for the rest of the process.
struct BlockCache {
  static constexpr size_t kMostBytes = size_t{512} << 20;
  std::multimap<size_t, void*> blocks;  // by size
  size_t bytes = 0;
  ~BlockCache() {
    for (auto& [size, block] : blocks) ::operator delete(block, kValuesAlignment);
  }
};

BlockCache& cache() {
  thread_local BlockCache blocks;
  return blocks;
}

}  // namespace

size_t block_size(size_t bytes) {
  return std::bit_ceil(bytes);
}

void* take_block(size_t bytes) {
  BlockCache& c = cache();
  const auto it = c.blocks.find(block_size(bytes));
  if (it == c.blocks.end()) return nullptr;
  void* block = it->second;
  c.bytes -= it->first;
  c.blocks.erase(it);
  return block;
}

bool keep_block(void* block, size_t bytes) {
  BlockCache& c = cache();
  const size_t size = block_size(bytes);
  if (c.bytes + size > BlockCache::kMostBytes) return false;
  c.blocks.emplace(size, block);
  c.bytes += size;
  return true;
}

}  // namespace h2::cpu_reference::detail
