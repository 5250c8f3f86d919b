// reduce: sum, mean, max (with the first index of the maximum) and amax over any set of dimensions.
// One block per output element with a fixed-order tree (deterministic), or one thread per output when
// each reduces few elements. Sums accumulate in fp64.
#include "launch.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

// The kept or the reduced dimensions of x: their sizes and x's strides along them.
struct Dims {
  int count;
  int64_t shape[H2_MAX_RANK];
  int64_t strides[H2_MAX_RANK];
};

__device__ int64_t offset_in(const Dims& dims, int64_t i) {
  int64_t offset = 0;
  for (int d = dims.count - 1; d >= 0; --d) {
    offset += (i % dims.shape[d]) * dims.strides[d];
    i /= dims.shape[d];
  }
  return offset;
}

// A partial result: the accumulated value, and for MAX the first index of it.
struct Partial {
  double value;
  int64_t index;
};

__device__ Partial combine(uint32_t op, Partial a, Partial b) {
  if (op == H2_REDUCE_SUM || op == H2_REDUCE_MEAN) return {a.value + b.value, 0};
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan || b_nan) {  // NaN wins; the earlier NaN among two
    if (a_nan && b_nan) return a.index <= b.index ? a : b;
    return a_nan ? a : b;
  }
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index <= b.index ? a : b;
}

__device__ Partial element(uint32_t op, const View& x, int64_t offset, int64_t r) {
  const double v = load(x, offset);
  return {op == H2_REDUCE_AMAX ? fabs(v) : v, r};
}

__device__ Partial identity(uint32_t op) {
  return {op == H2_REDUCE_SUM || op == H2_REDUCE_MEAN ? 0.0 : -INFINITY, INT64_MAX};
}

__device__ void finish(uint32_t op, Partial p, int64_t count, const View& y, const View& indices, int64_t o) {
  double value = p.value;
  if (op == H2_REDUCE_MEAN) value = count == 0 ? NAN : value / static_cast<double>(count);
  store_any(y, offset_of(y, o), value);
  if (indices.data != nullptr) reinterpret_cast<int64_t*>(indices.data)[offset_of(indices, o)] = p.index;
}

__global__ void reduce_block_kernel(View x, View y, View indices, Dims kept, Dims reduced, int64_t outputs,
                                    int64_t count, uint32_t op) {
  __shared__ Partial shared[kThreads];
  const int64_t o = block_row();
  if (o >= outputs) return;
  const int64_t base = offset_in(kept, o);
  Partial acc = identity(op);
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x)
    acc = combine(op, acc, element(op, x, base + offset_in(reduced, r), r));
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = combine(op, shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) finish(op, shared[0], count, y, indices, o);
}

__global__ void reduce_thread_kernel(View x, View y, View indices, Dims kept, Dims reduced, int64_t outputs,
                                     int64_t count, uint32_t op) {
  H2_FOR_EACH_ELEMENT(o, outputs) {
    const int64_t base = offset_in(kept, o);
    Partial acc = identity(op);
    for (int64_t r = 0; r < count; ++r) acc = combine(op, acc, element(op, x, base + offset_in(reduced, r), r));
    finish(op, acc, count, y, indices, o);
  }
}

}  // namespace

H2_Status op_reduce(H2_Stream* stream, const H2_ReduceArgs* args) {
  return run_op("reduce", stream, args, [&](OpLaunch& l) {
    if (args->op < H2_REDUCE_SUM || args->op > H2_REDUCE_AMAX)
      fail(H2_STATUS_INVALID_ARGUMENT, "unknown op " + std::to_string(args->op));
    const H2_Tensor& x = args->x;
    Dims kept{}, reduced{};
    int64_t outputs = 1, count = 1;
    for (uint32_t d = 0; d < x.rank; ++d) {
      Dims& dims = (args->dims_mask >> d) & 1u ? reduced : kept;
      dims.shape[dims.count] = x.shape[d];
      dims.strides[dims.count] = x.strides[d];
      ++dims.count;
      ((args->dims_mask >> d) & 1u ? count : outputs) *= x.shape[d];
    }
    if (outputs == 0) return;
    const View xv = make_view(x), y = make_view(args->y), indices = make_view(args->indices);
    if (count <= 32) {
      reduce_thread_kernel<<<grid_for(outputs), kThreads, 0, l.cuda>>>(xv, y, indices, kept, reduced, outputs, count,
                                                                       args->op);
      l.check_launch("reduce_thread_kernel");
    } else {
      reduce_block_kernel<<<grid_of_rows(outputs), kThreads, 0, l.cuda>>>(xv, y, indices, kept, reduced, outputs, count,
                                                                          args->op);
      l.check_launch("reduce_block_kernel");
    }
  });
}

}  // namespace h2::cuda
