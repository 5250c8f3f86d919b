// How a parameter is cut across the ranks of a tensor-parallel group (Megatron-LM's layout): a
// column-parallel matrix (w_qkv, w_up, w_gate) gives each rank a slice of its output columns, a
// row-parallel one (w_o, w_down) a slice of its input rows, and everything else (norms, the
// embedding, the LM head) is whole on every rank.
//
// A matrix may be cut group by group: w_qkv's columns are [q heads | k heads | v heads], and rank r
// takes the r-th slice of each group, so that its columns are its own heads' q, k and v.
#pragma once

#include <cstdint>
#include <vector>

#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::heteropp {

struct Sharding {
  int axis = -1;                // -1: whole on every rank; 0: rows are cut; 1: columns are cut
  std::vector<int64_t> groups;  // widths along `axis` of the groups cut separately (their sum: the whole)
  bool sharded() const { return axis >= 0; }
};

// The shape of rank `rank`'s shard of a tensor of `full` shape, out of `ranks` (each group's width
// must divide by `ranks`).
Shape shard_shape(const Shape& full, const Sharding& sharding, int ranks);
// Copies rank `rank`'s part of `full` into `shard` (to_shard) or back from it, on `stream`.
void copy_shard(Stream& stream, const Tensor& full, const Tensor& shard, const Sharding& sharding, int ranks, int rank,
                bool to_shard);

}  // namespace h2::heteropp
