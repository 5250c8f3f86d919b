// copy (with dtype conversion), fill, arange, index_select, gather and scatter_add.
#include <cmath>
#include <cstring>
#include <vector>

#include "dense.hpp"
#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

bool is_integer(H2_DType dtype) {
  return dtype == H2_DTYPE_I32 || dtype == H2_DTYPE_I64 || dtype == H2_DTYPE_U8 || dtype == H2_DTYPE_BOOL;
}

void copy_kernel(const TensorRef& x, const TensorRef& y) {
  if (is_integer(x.dtype) && is_integer(y.dtype)) {
    // Through int64, so large I64 values survive (fp64 holds only 53 bits).
    const std::vector<int64_t> values = load_indices(x);
    for (size_t e = 0; e < values.size(); ++e) {
      const int64_t offset = y.offset_of(static_cast<int64_t>(e));
      if (y.dtype == H2_DTYPE_I64) {
        std::memcpy(y.base + offset * 8, &values[e], 8);
      } else {
        store_element(y, offset, static_cast<double>(values[e]));
      }
    }
    return;
  }
  store(y, load(x));
}

// The element offset in `t` of the row-major index `linear` of `shape` (t's own shape may differ),
// with the coordinate along `dim` replaced by `along`.
int64_t offset_with(const TensorRef& t, const TensorRef& shape, int64_t linear, int dim, int64_t along) {
  int64_t offset = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    const int64_t coordinate = linear % shape.shape[d];
    linear /= shape.shape[d];
    offset += (d == dim ? along : coordinate) * t.strides[d];
  }
  return offset;
}

// The coordinate along `dim` of row-major index `linear` of `shape`.
int64_t coordinate_of(const TensorRef& shape, int64_t linear, int dim) {
  for (int d = shape.rank - 1; d > dim; --d) linear /= shape.shape[d];
  return linear % shape.shape[dim];
}

void index_select_kernel(const TensorRef& x, const TensorRef& indices, const TensorRef& y, int dim) {
  const std::vector<int64_t> ids = load_indices(indices);
  Values out(static_cast<size_t>(y.numel()));
  for (int64_t e = 0; e < y.numel(); ++e) {
    const int64_t id = ids[static_cast<size_t>(coordinate_of(y, e, dim))];
    if (id < 0 || id >= x.shape[dim]) index_error("index", id, x.shape[dim]);
    out[static_cast<size_t>(e)] = load_element(x, offset_with(x, y, e, dim, id));
  }
  store(y, out);
}

void gather_kernel(const TensorRef& x, const TensorRef& indices, const TensorRef& y, int dim) {
  const std::vector<int64_t> ids = load_indices(indices);
  Values out(ids.size());
  for (size_t e = 0; e < ids.size(); ++e) {
    if (ids[e] < 0 || ids[e] >= x.shape[dim]) index_error("index", ids[e], x.shape[dim]);
    out[e] = load_element(x, offset_with(x, indices, static_cast<int64_t>(e), dim, ids[e]));
  }
  store(y, out);
}

void scatter_add_kernel(const TensorRef& y, const TensorRef& indices, const TensorRef& src, int dim) {
  const std::vector<int64_t> ids = load_indices(indices);
  const Values values = load(src);
  Values out = load(y);
  for (size_t e = 0; e < ids.size(); ++e) {  // in order: a fixed summation order
    if (ids[e] < 0 || ids[e] >= y.shape[dim]) index_error("index", ids[e], y.shape[dim]);
    // y is contiguous in `out`; find the row-major index of the target element.
    int64_t linear = 0, rest = static_cast<int64_t>(e);
    int64_t coordinates[H2_MAX_RANK];
    for (int d = indices.rank - 1; d >= 0; --d) {
      coordinates[d] = rest % indices.shape[d];
      rest /= indices.shape[d];
    }
    coordinates[dim] = ids[e];
    for (int d = 0; d < y.rank; ++d) linear = linear * y.shape[d] + coordinates[d];
    out[static_cast<size_t>(linear)] += values[e];
  }
  store(y, out);
}

}  // namespace

H2_Status op_copy(H2_Stream* stream, const H2_CopyArgs* args) {
  return run_op("copy", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    if (dense(x) && dense(y) && x.numel() == y.numel() && !is_integer(x.dtype) && !is_integer(y.dtype)) {
      ThreadPool* pool = &call.pool();
      call.enqueue([=] {
        // The same dtype: the bytes themselves (a value read and stored again is the same value).
        if (x.dtype == y.dtype) {
          // An empty tensor may have no storage: memmove's pointers must be valid even for 0 bytes.
          if (y.numel() > 0) std::memmove(y.base, x.base, static_cast<size_t>(y.numel()) * dtype_bytes(y.dtype));
          return;
        }
        dense_elementwise(*pool, y, [&](int64_t i) { return load_element(x, i); });
      });
      return;
    }
    call.enqueue([=] { copy_kernel(x, y); });
  });
}

H2_Status op_fill(H2_Stream* stream, const H2_FillArgs* args) {
  return run_op("fill", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y");
    const double value = args->value;
    if (dense(y) && !is_integer(y.dtype)) {
      ThreadPool* pool = &call.pool();
      call.enqueue([=] { dense_elementwise(*pool, y, [&](int64_t) { return value; }); });
      return;
    }
    call.enqueue([=] { store(y, Values(static_cast<size_t>(y.numel()), value)); });
  });
}

H2_Status op_arange(H2_Stream* stream, const H2_ArangeArgs* args) {
  return run_op("arange", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y");
    const double start = args->start, step = args->step;
    call.enqueue([=] {
      Values values(static_cast<size_t>(y.numel()));
      for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<double>(i) * step;
      store(y, values);
    });
  });
}

H2_Status op_index_select(H2_Stream* stream, const H2_IndexSelectArgs* args) {
  return run_op("index_select", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), idx = call.tensor(args->indices, "indices"), y = call.tensor(args->y, "y");
    const int dim = args->dim;
    call.enqueue([=] { index_select_kernel(x, idx, y, dim); });
  });
}

H2_Status op_gather(H2_Stream* stream, const H2_GatherArgs* args) {
  return run_op("gather", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), idx = call.tensor(args->indices, "indices"), y = call.tensor(args->y, "y");
    const int dim = args->dim;
    call.enqueue([=] { gather_kernel(x, idx, y, dim); });
  });
}

H2_Status op_scatter_add(H2_Stream* stream, const H2_ScatterAddArgs* args) {
  return run_op("scatter_add", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y"), idx = call.tensor(args->indices, "indices");
    TensorRef src = call.tensor(args->src, "src");
    const int dim = args->dim;
    call.enqueue([=] { scatter_add_kernel(y, idx, src, dim); });
  });
}

}  // namespace h2::cpu_reference
