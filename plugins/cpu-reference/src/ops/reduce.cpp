// reduce: sum, mean, max (with the index of the first maximum) and amax over a set of dimensions,
// visiting x in row-major order so every sum has one fixed order.
#include <cmath>
#include <limits>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

namespace {

// The test plugin's fp32 sum in reverse order (see planted_defects.hpp); the real reference never calls this.
void planted_reversed_fp32_sums(Values& acc, const Values& in, const std::vector<size_t>& out_of) {
  std::vector<float> sums(acc.size(), 0.0f);
  for (size_t e = in.size(); e-- > 0;) sums[out_of[e]] += static_cast<float>(in[e]);
  for (size_t o = 0; o < acc.size(); ++o) acc[o] = sums[o];
}

void reduce_kernel(uint32_t op, const TensorRef& x, const TensorRef& y, const TensorRef& indices, uint32_t dims_mask) {
  const Values in = load(x);
  // For each element of x, the row-major index of its output element (reduced dimensions dropped),
  // and its coordinate along the reduced dimension (for MAX's indices).
  int64_t out_count = 1;
  for (int d = 0; d < x.rank; ++d)
    if (!(dims_mask & (1u << d))) out_count *= x.shape[d];
  const bool is_max = op == H2_REDUCE_MAX || op == H2_REDUCE_AMAX;
  const double start = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  Values acc(static_cast<size_t>(out_count), start);
  std::vector<int64_t> argmax(static_cast<size_t>(out_count), -1), count(static_cast<size_t>(out_count), 0);
  std::vector<bool> nan(static_cast<size_t>(out_count), false);

  int64_t index[H2_MAX_RANK] = {};
  std::vector<size_t> out_of;  // the test plugin's: each element's output
  for (size_t e = 0; e < in.size(); ++e) {
    int64_t out = 0, along = 0;
    for (int d = 0; d < x.rank; ++d) {
      if (dims_mask & (1u << d)) {
        along = index[d];
      } else {
        out = out * x.shape[d] + index[d];
      }
    }
    const size_t o = static_cast<size_t>(out);
    if (planted_defect() == Defect::reversed_fp32_reduce) out_of.push_back(o);
    const double v = op == H2_REDUCE_AMAX ? std::fabs(in[e]) : in[e];
    if (is_max) {
      if (std::isnan(v)) {
        if (!nan[o]) argmax[o] = along;  // the first NaN wins, as in PyTorch
        nan[o] = true;
      } else if (!nan[o] && (argmax[o] < 0 || v > acc[o])) {
        acc[o] = v;
        argmax[o] = along;
      }
    } else {
      const double term = planted_defect() == Defect::reduce_skips_nan && std::isnan(v) ? 0.0 : v;
      acc[o] += term;
    }
    ++count[o];
    for (int d = x.rank - 1; d >= 0; --d) {  // advance the row-major index
      if (++index[d] < x.shape[d]) break;
      index[d] = 0;
    }
  }
  if (planted_defect() == Defect::reversed_fp32_reduce && !is_max) planted_reversed_fp32_sums(acc, in, out_of);
  for (size_t o = 0; o < acc.size(); ++o) {
    if (op == H2_REDUCE_MEAN)
      acc[o] = count[o] == 0 ? std::numeric_limits<double>::quiet_NaN() : acc[o] / static_cast<double>(count[o]);
    if (is_max && nan[o]) acc[o] = std::numeric_limits<double>::quiet_NaN();
  }
  store(y, acc);
  if (indices.present) {
    Values as_double(argmax.begin(), argmax.end());
    store(indices, as_double);
  }
}

}  // namespace

H2_Status op_reduce(H2_Stream* stream, const H2_ReduceArgs* args) {
  return run_op("reduce", stream, args, [&](OpCall& call) {
    const uint32_t op = args->op, dims_mask = args->dims_mask;
    if (op < H2_REDUCE_SUM || op > H2_REDUCE_AMAX)
      fail(H2_STATUS_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(op));
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    TensorRef indices = call.tensor(args->indices, "indices");
    if (planted_defect() == Defect::reduce_ignores_strides) x.assume_contiguous();
    call.enqueue([=] { reduce_kernel(op, x, y, indices, dims_mask); });
  });
}

}  // namespace h2::cpu_reference
