// Embedding, index_select, gather and scatter_add. The backward-like sums (embedding_backward,
// scatter_add) are deterministic: destinations are sorted stably with CUB's radix sort, so each
// destination adds its sources in position order, in one thread, on every run.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

// The logical coordinates of element i of a tensor of v's shape.
__device__ void coordinates(const View& v, int64_t i, int64_t* c) {
  for (int d = v.rank - 1; d >= 0; --d) {
    c[d] = i % v.shape[d];
    i /= v.shape[d];
  }
}

__device__ int64_t offset_at(const View& v, const int64_t* c) {
  int64_t offset = 0;
  for (int d = 0; d < v.rank; ++d) offset += c[d] * v.strides[d];
  return offset;
}

__device__ int64_t logical_index_at(const View& v, const int64_t* c) {
  int64_t index = 0;
  for (int d = 0; d < v.rank; ++d) index = index * v.shape[d] + c[d];
  return index;
}

void fill_iota(const OpLaunch& l, int64_t* out, int64_t n) {
  launch_map(l, n, [=] __device__(int64_t i) { out[i] = i; });
}

// Groups n keys in [0, limit) (a key of `limit` marks an invalid source, which is dropped) into runs of
// equal keys, keeping each run's sources in position order.
struct Runs {
  int64_t* keys;       // the key of each run
  int64_t* starts;     // first sorted position of each run
  int64_t* lengths;    // sources in each run
  int64_t* positions;  // source positions, sorted by key, stable
  int64_t* count;      // number of runs (device)
};

class RunBuilder {
 public:
  RunBuilder(const OpLaunch& l, const int64_t* keys, int64_t n, int64_t limit)
      : storage_(l, sizeof(int64_t) * (6 * static_cast<size_t>(n) + 1)) {
    int64_t* base = storage_.as<int64_t>();
    int64_t* sorted_keys = base;
    int64_t* iota = base + n;
    runs_ = {base + 2 * n, base + 3 * n, base + 4 * n, base + 5 * n, base + 6 * n};
    fill_iota(l, iota, n);
    int end_bit = 1;
    while (end_bit < 63 && (int64_t{1} << end_bit) <= limit) ++end_bit;
    const int items = static_cast<int>(n);
    size_t sort_bytes = 0, encode_bytes = 0, scan_bytes = 0;
    H2_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, sorted_keys, iota, runs_.positions, items,
                                                  0, end_bit, l.cuda));
    H2_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, sorted_keys, runs_.keys, runs_.lengths,
                                                     runs_.count, items, l.cuda));
    H2_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, runs_.lengths, runs_.starts, items, l.cuda));
    size_t bytes = std::max(sort_bytes, std::max(encode_bytes, scan_bytes));
    Scratch temp(l, bytes);
    H2_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.as<void>(), sort_bytes, keys, sorted_keys, iota, runs_.positions,
                                                  items, 0, end_bit, l.cuda));
    H2_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.as<void>(), encode_bytes, sorted_keys, runs_.keys,
                                                     runs_.lengths, runs_.count, items, l.cuda));
    // Lengths beyond the run count are garbage; their starts are never read.
    H2_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(temp.as<void>(), scan_bytes, runs_.lengths, runs_.starts, items, l.cuda));
  }
  const Runs& runs() const { return runs_; }

 private:
  Scratch storage_;
  Runs runs_;
};

// y[c] = x[c with c[dim] replaced by an index], the index read at indices[c] (gather, per_element)
// or at indices[c[dim]] (index_select).
void select_along(const OpLaunch& l, const H2_Tensor& x_tensor, const H2_Tensor& indices_tensor,
                  const H2_Tensor& y_tensor, int dim, int op, bool per_element) {
  const View x = make_view(x_tensor), indices = make_view(indices_tensor), y = make_view(y_tensor);
  const int64_t limit = x_tensor.shape[dim];
  DeviceError* error = l.error;
  launch_map(l, numel(y_tensor), [=] __device__(int64_t i) {
    int64_t c[H2_MAX_RANK];
    coordinates(y, i, c);
    const int64_t v = load_index(indices, per_element ? offset_at(indices, c) : offset_of(indices, c[dim]));
    if (v < 0 || v >= limit) {
      report_index_error(error, op, dim, v, limit);
      return;
    }
    const int64_t out = offset_at(y, c);
    c[dim] = v;
    store(y, out, load(x, offset_at(x, c)));
  });
}

void check_count(int64_t n) {
  if (n > INT32_MAX) fail(H2_STATUS_UNSUPPORTED, "more than 2^31 - 1 sources is not supported");
}

}  // namespace

H2_Status op_embedding(H2_Stream* stream, const H2_EmbeddingArgs* args) {
  return run_op("embedding", stream, args, [&](OpLaunch& l) {
    const View weight = make_view(args->weight), indices = make_view(args->indices), y = make_view(args->y);
    const int64_t vocab = args->weight.shape[0], dim = args->weight.shape[1];
    DeviceError* error = l.error;
    launch_map(l, numel(args->y), [=] __device__(int64_t i) {
      const int64_t p = i / dim, d = i % dim;
      const int64_t v = load_index(indices, offset_of(indices, p));
      if (v < 0 || v >= vocab) {
        report_index_error(error, H2_OP_EMBEDDING, 0, v, vocab);
        return;
      }
      store(y, offset_of(y, i), load(weight, v * weight.strides[0] + d * weight.strides[1]));
    });
  });
}

H2_Status op_embedding_backward(H2_Stream* stream, const H2_EmbeddingBackwardArgs* args) {
  return run_op("embedding_backward", stream, args, [&](OpLaunch& l) {
    const View indices = make_view(args->indices), dy = make_view(args->dy), dweight = make_view(args->dweight);
    const int64_t vocab = args->dweight.shape[0], dim = args->dweight.shape[1];
    const int64_t positions = numel(args->indices);
    check_count(positions);
    launch_map(l, numel(args->dweight), [=] __device__(int64_t i) { store(dweight, offset_of(dweight, i), 0.0f); });
    if (positions == 0) return;
    Scratch keys(l, sizeof(int64_t) * static_cast<size_t>(positions));
    int64_t* k = keys.as<int64_t>();
    DeviceError* error = l.error;
    launch_map(l, positions, [=] __device__(int64_t p) {
      const int64_t v = load_index(indices, offset_of(indices, p));
      const bool valid = v >= 0 && v < vocab;
      if (!valid) report_index_error(error, H2_OP_EMBEDDING_BACKWARD, 0, v, vocab);
      k[p] = valid ? v : vocab;
    });
    RunBuilder builder(l, k, positions, vocab);
    const Runs runs = builder.runs();
    // One thread per (run, column): a run's rows are summed in position order.
    launch_map(l, positions * dim, [=] __device__(int64_t i) {
      const int64_t run = i / dim, d = i % dim;
      if (run >= *runs.count) return;
      const int64_t v = runs.keys[run];
      if (v >= vocab) return;
      float sum = 0;
      for (int64_t s = runs.starts[run], e = s + runs.lengths[run]; s < e; ++s) {
        const int64_t p = runs.positions[s];
        sum += load(dy, row_offset(dy, p) + d * col_stride(dy));
      }
      store(dweight, v * dweight.strides[0] + d * dweight.strides[1], sum);
    });
  });
}

H2_Status op_index_select(H2_Stream* stream, const H2_IndexSelectArgs* args) {
  return run_op("index_select", stream, args, [&](OpLaunch& l) {
    select_along(l, args->x, args->indices, args->y, args->dim, H2_OP_INDEX_SELECT, false);
  });
}

H2_Status op_gather(H2_Stream* stream, const H2_GatherArgs* args) {
  return run_op("gather", stream, args,
                [&](OpLaunch& l) { select_along(l, args->x, args->indices, args->y, args->dim, H2_OP_GATHER, true); });
}

H2_Status op_scatter_add(H2_Stream* stream, const H2_ScatterAddArgs* args) {
  return run_op("scatter_add", stream, args, [&](OpLaunch& l) {
    const View y = make_view(args->y), indices = make_view(args->indices), src = make_view(args->src);
    const int dim = args->dim;
    const int64_t limit = args->y.shape[dim], sources = numel(args->src), destinations = numel(args->y);
    check_count(sources);
    if (sources == 0) return;
    Scratch keys(l, sizeof(int64_t) * static_cast<size_t>(sources));
    int64_t* k = keys.as<int64_t>();
    DeviceError* error = l.error;
    // The key of a source is the logical index of its destination in y.
    launch_map(l, sources, [=] __device__(int64_t p) {
      int64_t c[H2_MAX_RANK];
      coordinates(src, p, c);
      const int64_t v = load_index(indices, offset_at(indices, c));
      if (v < 0 || v >= limit) {
        report_index_error(error, H2_OP_SCATTER_ADD, dim, v, limit);
        k[p] = destinations;
        return;
      }
      c[dim] = v;
      k[p] = logical_index_at(y, c);
    });
    RunBuilder builder(l, k, sources, destinations);
    const Runs runs = builder.runs();
    launch_map(l, sources, [=] __device__(int64_t run) {
      if (run >= *runs.count) return;
      const int64_t destination = runs.keys[run];
      if (destination >= destinations) return;
      const int64_t out = offset_of(y, destination);
      float sum = load(y, out);
      for (int64_t s = runs.starts[run], e = s + runs.lengths[run]; s < e; ++s)
        sum += load(src, offset_of(src, runs.positions[s]));
      store(y, out, sum);
    });
  });
}

}  // namespace h2::cuda
