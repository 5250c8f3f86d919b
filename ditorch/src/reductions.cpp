// Reductions on h2::ops::reduce: sum and mean over any dimensions (gradients of broadcasts reduce
// with sum), amax, max over a dimension with its indices, and max of a whole tensor; their minima as
// the negated maxima of the negation. Sums of masks count on the device (in f32); other integer
// reductions run on the CPU and are counted as fallbacks.
#include "kernels.hpp"

namespace h2torch {
namespace {

using h2::ops::ReduceOp;

std::vector<int64_t> reduced_shape(const at::Tensor& self, const std::vector<int>& dims, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      shape.push_back(self.size(d));
    else if (keepdim)
      shape.push_back(1);
  }
  return shape;
}

at::Tensor reduce_on_cpu(ReduceOp op, const at::Tensor& x, const std::vector<int>& dims, bool keepdim,
                         c10::ScalarType type) {
  const std::vector<int64_t> d(dims.begin(), dims.end());
  switch (op) {
    case ReduceOp::sum: return at::sum(x, d, keepdim, type);
    case ReduceOp::mean: return at::mean(x, d, keepdim, type);
    case ReduceOp::max:
    case ReduceOp::amax: return at::amax(x, d, keepdim);
  }
  return {};
}

at::Tensor& reduce_into(const char* name, ReduceOp op, const at::Tensor& self, c10::IntArrayRef dim_list, bool keepdim,
                        at::Tensor& out) {
  const int index = one_device(name, {&self, &out});
  const c10::DeviceGuard guard(h2_device(index));
  const std::vector<int> dims = normalized_dims(dim_list, self.dim());
  resize_out(out, reduced_shape(self, dims, keepdim));
  const c10::ScalarType type = out.scalar_type();
  // Counting truth values (a mask's sum) runs on the device in f32: exact below 2^24 elements.
  const bool counting = op == ReduceOp::sum && (self.scalar_type() == at::kBool || self.scalar_type() == at::kByte) &&
                        self.numel() < (int64_t{1} << 24);
  if (!counting && (!c10::isFloatingType(type) || !c10::isFloatingType(self.scalar_type()))) {
    note_fallback(std::string("aten::") + name + " (" + c10::toString(self.scalar_type()) + ")");
    out.copy_(reduce_on_cpu(op, self.cpu(), dims, keepdim, type));
    return out;
  }
  if (out.numel() == 0) return out;
  if (self.numel() == 0) {  // an empty reduction: LibTorch's identities (max has none)
    TORCH_CHECK(op == ReduceOp::sum || op == ReduceOp::mean, name, ": cannot reduce an empty dimension");
    return out.fill_(op == ReduceOp::sum ? 0.0 : std::numeric_limits<double>::quiet_NaN());
  }
  if (self.dim() == 0) {
    out.copy_(self);
    return out;
  }
  // The operator writes x's dtype or f32; other output dtypes (a count's i64) through an f32 result.
  h2::Stream& s = stream(index);
  const h2::Tensor x = counting ? operand(self, at::kFloat) : as_h2(self);
  if (h2_dtype(type) == x.dtype() || type == at::kFloat) {
    h2::ops::reduce(s, op, x, dims, as_h2(out), keepdim);
  } else {
    const h2::Tensor result = h2::Tensor::empty(s, shape_of(out.sizes()), h2::DType::f32);
    h2::ops::reduce(s, op, x, dims, result, keepdim);
    h2::ops::copy(s, result, as_h2(out));
  }
  return out;
}

c10::ScalarType sum_type(const at::Tensor& self, c10::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    c10::optional<c10::ScalarType> /*dtype*/, at::Tensor& out) {
  return reduce_into("sum", ReduceOp::sum, self, dim.value_or(c10::IntArrayRef{}), keepdim, out);
}
at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               c10::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(sum_type(self, dtype)));
  return h2torch::sum_out(self, dim, keepdim, dtype, out);
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     c10::optional<c10::ScalarType> /*dtype*/, at::Tensor& out) {
  return reduce_into("mean", ReduceOp::mean, self, dim.value_or(c10::IntArrayRef{}), keepdim, out);
}
at::Tensor mean(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                c10::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(c10::isFloatingType(dtype.value_or(self.scalar_type())),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: ",
              self.scalar_type());
  at::Tensor out = at::empty({0}, self.options().dtype(dtype.value_or(self.scalar_type())));
  return h2torch::mean_out(self, dim, keepdim, dtype, out);
}

at::Tensor& amax_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  return reduce_into("amax", ReduceOp::max, self, dim, keepdim, out);
}
at::Tensor amax(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options());
  return h2torch::amax_out(self, dim, keepdim, out);
}

// The maximum of a whole tensor.
at::Tensor max_all(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  at::Tensor out = at::empty({0}, self.options());
  return reduce_into("max", ReduceOp::max, self, {}, false, out);
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& max,
                                                 at::Tensor& indices) {
  const int index = one_device("max", {&self, &max, &indices});
  check_floating("max", self);
  const c10::DeviceGuard guard(h2_device(index));
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim ", dim, " to have non-zero size.");
  const std::vector<int> dims = normalized_dims({dim}, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0) {
    resize_out(max, {});
    resize_out(indices, {});
    max.copy_(self);
    indices.zero_();
    return {max, indices};
  }
  const std::vector<int64_t> shape = reduced_shape(self, dims, keepdim);
  resize_out(max, shape);
  resize_out(indices, shape);
  h2::ops::reduce(stream(index), ReduceOp::max, as_h2(self), dims, as_h2(max), keepdim, as_h2(indices));
  return {max, indices};
}
std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor max = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  max_dim_out(self, dim, keepdim, max, indices);
  return {max, indices};
}

// ---- minima: the negated maxima of the negation (the ABI reduces with max) ----

at::Tensor min_all(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  return at::neg(at::max(at::neg(self)));
}

at::Tensor amin(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  return at::neg(at::amax(at::neg(self), dim, keepdim));
}
at::Tensor& amin_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  const at::Tensor result = h2torch::amin(self, dim, keepdim);
  resize_out(out, result.sizes());
  out.copy_(result);
  return out;
}

std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  auto [values, indices] = at::max(at::neg(self), dim, keepdim);
  return {at::neg(values), indices};
}
std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& min,
                                                 at::Tensor& indices) {
  auto [values, where] = h2torch::min_dim(self, dim, keepdim);
  resize_out(min, values.sizes());
  resize_out(indices, where.sizes());
  min.copy_(values);
  indices.copy_(where);
  return {min, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  H2_IMPL(m, "sum.dim_IntList", sum);
  H2_IMPL(m, "sum.IntList_out", sum_out);
  H2_IMPL(m, "mean.dim", mean);
  H2_IMPL(m, "mean.out", mean_out);
  H2_IMPL(m, "amax", amax);
  H2_IMPL(m, "amax.out", amax_out);
  H2_IMPL(m, "max", max_all);
  H2_IMPL(m, "max.dim", max_dim);
  H2_IMPL(m, "max.dim_max", max_dim_out);
  H2_IMPL(m, "min", min_all);
  H2_IMPL(m, "min.dim", min_dim);
  H2_IMPL(m, "min.dim_min", min_dim_out);
  H2_IMPL(m, "amin", amin);
  H2_IMPL(m, "amin.out", amin_out);
}

}  // namespace h2torch
