#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

bool is_float(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

TensorKind kind_of(DType dtype) {
  if (is_float(dtype)) return TensorKind::floating;
  return dtype == DType::i32 || dtype == DType::i64 ? TensorKind::index : TensorKind::mask;
}

int normalize(const OpCheck& check, int dim, const Tensor& t, const char* name) {
  const int d = dim < 0 ? dim + t.rank() : dim;
  if (!(d >= 0 && d < t.rank()))
    check.fail("dim " + std::to_string(dim) + " is out of range for " + OpCheck::is(name, t));
  return d;
}

// gather and scatter_add: `indices` has the rank of `data`, no dimension but `dim` larger.
void require_index_layout(const OpCheck& check, const Tensor& data, const char* data_name, const Tensor& indices,
                          int dim) {
  if (!(indices.rank() == data.rank()))
    check.fail(OpCheck::is("indices", indices) + " but must have the rank of " + OpCheck::is(data_name, data));
  for (int d = 0; d < data.rank(); ++d)
    if (!(d == dim || indices.size(d) <= data.size(d)))
      check.fail(OpCheck::is("indices", indices) + " is larger than " + OpCheck::is(data_name, data) +
                 " in dimension " + std::to_string(d));
}

}  // namespace

void copy(Stream& stream, const Tensor& x, const Tensor& y) {
  OpCheck check(stream, H2_OP_COPY);
  check.input(x, "x", kind_of(x.dtype()));
  check.output(y, "y", kind_of(y.dtype()));
  Tensor source = x;
  if (x.shape() != y.shape()) {
    try {
      source = x.expand(y.shape());
    } catch (const Error&) {
      check.fail(OpCheck::is("x", x) + " does not broadcast to " + OpCheck::is("y", y));
    }
  }
  auto args = make_args<H2_CopyArgs>();
  args.x = source.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().copy), args);
}

void fill(Stream& stream, const Tensor& y, double value) {
  OpCheck check(stream, H2_OP_FILL);
  check.output(y, "y", kind_of(y.dtype()));
  auto args = make_args<H2_FillArgs>();
  args.y = y.descriptor();
  args.value = value;
  check.call(op_slot(check, check.ops().fill), args);
}

void arange(Stream& stream, const Tensor& y, double start, double step) {
  OpCheck check(stream, H2_OP_ARANGE);
  check.output(y, "y", kind_of(y.dtype()));
  check.require_rank(y, "y", 1);
  auto args = make_args<H2_ArangeArgs>();
  args.y = y.descriptor();
  args.start = start;
  args.step = step;
  check.call(op_slot(check, check.ops().arange), args);
}

void index_select(Stream& stream, const Tensor& x, int dim, const Tensor& indices, const Tensor& y) {
  OpCheck check(stream, H2_OP_INDEX_SELECT);
  check.input(x, "x");
  check.input(indices, "indices", TensorKind::index);
  check.output(y, "y");
  const int d = normalize(check, dim, x, "x");
  check.require_rank(indices, "indices", 1);
  Shape expected = x.shape();
  expected[static_cast<size_t>(d)] = indices.size(0);
  check.require_shape(y, "y", expected, "x with dimension `dim` replaced by the indices");
  check.require_same_dtype(x, "x", y, "y");
  auto args = make_args<H2_IndexSelectArgs>();
  args.x = x.descriptor();
  args.indices = indices.descriptor();
  args.y = y.descriptor();
  args.dim = d;
  check.call(op_slot(check, check.ops().index_select), args);
}

void gather(Stream& stream, const Tensor& x, int dim, const Tensor& indices, const Tensor& y) {
  OpCheck check(stream, H2_OP_GATHER);
  check.input(x, "x");
  check.input(indices, "indices", TensorKind::index);
  check.output(y, "y");
  const int d = normalize(check, dim, x, "x");
  require_index_layout(check, x, "x", indices, d);
  check.require_same_shape(y, "y", indices, "indices");
  check.require_same_dtype(x, "x", y, "y");
  auto args = make_args<H2_GatherArgs>();
  args.x = x.descriptor();
  args.indices = indices.descriptor();
  args.y = y.descriptor();
  args.dim = d;
  check.call(op_slot(check, check.ops().gather), args);
}

void scatter_add(Stream& stream, const Tensor& y, int dim, const Tensor& indices, const Tensor& src) {
  OpCheck check(stream, H2_OP_SCATTER_ADD);
  check.inout(y, "y");
  check.input(indices, "indices", TensorKind::index);
  check.input(src, "src");
  const int d = normalize(check, dim, y, "y");
  require_index_layout(check, y, "y", indices, d);
  check.require_same_shape(src, "src", indices, "indices");
  check.require_same_dtype(y, "y", src, "src");
  auto args = make_args<H2_ScatterAddArgs>();
  args.y = y.descriptor();
  args.indices = indices.descriptor();
  args.src = src.descriptor();
  args.dim = d;
  check.call(op_slot(check, check.ops().scatter_add), args);
}

}  // namespace h2::ops
