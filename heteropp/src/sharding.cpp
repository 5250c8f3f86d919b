#include "h2/heteropp/sharding.hpp"

#include "h2/error.hpp"
#include "h2/ops.hpp"

namespace h2::heteropp {

Shape shard_shape(const Shape& full, const Sharding& sharding, int ranks) {
  if (!sharding.sharded() || ranks == 1) return full;
  Shape shape = full;
  int64_t total = 0;
  for (int64_t width : sharding.groups) {
    if (width % ranks != 0)
      throw Error(H2_STATUS_INVALID_ARGUMENT, "a group of width " + std::to_string(width) +
                                                  " does not split evenly over " + std::to_string(ranks) +
                                                  " tensor-parallel ranks");
    total += width;
  }
  const size_t axis = static_cast<size_t>(sharding.axis);
  if (axis >= shape.size() || total != shape[axis])
    throw Error(H2_STATUS_INTERNAL, "sharding groups do not cover the tensor's dimension");
  shape[axis] = total / ranks;
  return shape;
}

void copy_shard(Stream& stream, const Tensor& full, const Tensor& shard, const Sharding& sharding, int ranks, int rank,
                bool to_shard) {
  if (!sharding.sharded() || ranks == 1) {
    if (to_shard) {
      ops::copy(stream, full, shard);
    } else {
      ops::copy(stream, shard, full);
    }
    return;
  }
  int64_t full_offset = 0, shard_offset = 0;
  for (int64_t width : sharding.groups) {
    const int64_t part = width / ranks;
    const Tensor whole_part = full.slice(sharding.axis, full_offset + rank * part, full_offset + (rank + 1) * part);
    const Tensor shard_part = shard.slice(sharding.axis, shard_offset, shard_offset + part);
    if (to_shard) {
      ops::copy(stream, whole_part, shard_part);
    } else {
      ops::copy(stream, shard_part, whole_part);
    }
    full_offset += width;
    shard_offset += part;
  }
}

}  // namespace h2::heteropp
