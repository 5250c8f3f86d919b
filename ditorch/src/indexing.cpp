// Indexing aten operators on h2::ops: index_select (embedding's forward) and index_add (its
// backward), gather, scatter_add and cat, each functional, in place and out=. scatter (assignment)
// has no kernel: with repeated indices LibTorch keeps one of the values, which a sum cannot express,
// so it runs through the counted CPU fallback.
#include "kernels.hpp"

namespace h2torch {
namespace {

void check_index(const char* op, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32/int64 for index, got ", index.scalar_type());
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  const int device = one_device("index_select", {&self, &index, &out});
  check_index("index_select", index);
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got ", index.sizes());
  const c10::DeviceGuard guard(h2_device(device));
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = index.numel();
  resize_out(out, shape);
  if (out.numel() == 0) return out;
  h2::ops::index_select(stream(device), as_h2(self), static_cast<int>(dim), as_h2(index).view({index.numel()}),
                        as_h2(out));
  return out;
}
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return h2torch::index_select_out(self, dim, index, out);
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool /*sparse_grad*/,
                       at::Tensor& out) {
  const int device = one_device("gather", {&self, &index, &out});
  check_index("gather", index);
  const c10::DeviceGuard guard(h2_device(device));
  resize_out(out, index.sizes());
  if (out.numel() == 0) return out;
  h2::ops::gather(stream(device), as_h2(self), static_cast<int>(c10::maybe_wrap_dim(dim, self.dim())), as_h2(index),
                  as_h2(out));
  return out;
}
at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty(index.sizes(), self.options());
  return h2torch::gather_out(self, dim, index, sparse_grad, out);
}

// out = self, then out[index[i][j]][j] += src[i][j] (dim 0; likewise for others).
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  const int device = one_device("scatter_add", {&self, &index, &src, &out});
  check_index("scatter_add", index);
  TORCH_CHECK(self.scalar_type() == src.scalar_type(), "scatter_add(): Expected self.dtype to be equal to src.dtype");
  const c10::DeviceGuard guard(h2_device(device));
  resize_out(out, self.sizes());
  h2::Stream& s = stream(device);
  if (!out.is_same(self)) h2::ops::copy(s, as_h2(self), as_h2(out));
  if (index.numel() == 0) return out;
  h2::ops::scatter_add(s, as_h2(out), static_cast<int>(c10::maybe_wrap_dim(dim, self.dim())), as_h2(index), as_h2(src));
  return out;
}
at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return h2torch::scatter_add_out(self, dim, index, src, out);
}
at::Tensor& scatter_add_inplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return h2torch::scatter_add_out(self, dim, index, src, self);
}

// out = self, then out.select(dim, index[i]) += alpha * source.select(dim, i): a scatter_add whose
// index is `index` spread over source's shape.
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const c10::Scalar& alpha, at::Tensor& out) {
  const int device = one_device("index_add", {&self, &index, &source, &out});
  check_index("index_add", index);
  TORCH_CHECK(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  const c10::DeviceGuard guard(h2_device(device));
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(source.dim() == self.dim() && (self.dim() == 0 || source.size(dim) == index.numel()),
              "index_add_(): source ", source.sizes(), " does not match index of ", index.numel(),
              " element(s) along dim ", dim, " of ", self.sizes());
  resize_out(out, self.sizes());
  h2::Stream& s = stream(device);
  if (!out.is_same(self)) h2::ops::copy(s, as_h2(self), as_h2(out));
  if (index.numel() == 0) return out;
  h2::Shape along(static_cast<size_t>(source.dim()), 1);
  along[static_cast<size_t>(dim)] = index.numel();
  const h2::Tensor spread = h2::Tensor::empty(s, shape_of(source.sizes()), h2::DType::i64);
  h2::ops::copy(s, operand(index, at::kLong).view(along).expand(spread.shape()), spread);
  h2::Tensor values = operand(source, out.scalar_type());
  if (alpha.toDouble() != 1) {
    const h2::Tensor scaled = h2::Tensor::empty(s, values.shape(), values.dtype());
    h2::ops::binary(s, h2::ops::BinaryOp::mul, values, alpha.toDouble(), scaled);
    values = scaled;
  }
  h2::ops::scatter_add(s, as_h2(out), static_cast<int>(dim), spread, values);
  return out;
}
at::Tensor index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                     const c10::Scalar& alpha) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return h2torch::index_add_out(self, dim, index, source, alpha, out);
}
at::Tensor& index_add_inplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                              const c10::Scalar& alpha) {
  return h2torch::index_add_out(self, dim, index, source, alpha, self);
}

// The inputs copied side by side along dim (1-D empty tensors skipped, as LibTorch does).
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) inputs.push_back(t);
  TORCH_CHECK(!inputs.empty() || tensors.size() > 0, "torch.cat(): expected a non-empty list of Tensors");
  if (inputs.empty()) {
    resize_out(out, {0});
    return out;
  }
  const at::Tensor& first = inputs.front();
  dim = c10::maybe_wrap_dim(dim, first.dim());
  std::vector<int64_t> shape = first.sizes().vec();
  shape[dim] = 0;
  for (const at::Tensor& t : inputs) {
    one_device("cat", {&first, &t, &out});
    TORCH_CHECK(t.dim() == first.dim(), "torch.cat(): Tensors must have same number of dimensions: got ", first.dim(),
                " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d)
      TORCH_CHECK(d == dim || t.size(d) == first.size(d), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", first.size(d), " but got size ", t.size(d), " for tensor number ",
                  &t - inputs.data(), " in the list.");
    shape[dim] += t.size(dim);
  }
  const c10::DeviceGuard guard(out.device());
  resize_out(out, shape);
  h2::Stream& s = stream_of(out);
  int64_t offset = 0;
  for (const at::Tensor& t : inputs) {
    if (t.numel() > 0) h2::ops::copy(s, as_h2(t), as_h2(out.narrow(dim, offset, t.size(dim))));
    offset += t.size(dim);
  }
  return out;
}
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  c10::optional<at::Tensor> first;
  std::vector<at::ScalarType> types;
  for (const at::Tensor& t : tensors) {
    if (!first) first = t;
    types.push_back(t.scalar_type());
  }
  TORCH_CHECK(first.has_value(), "torch.cat(): expected a non-empty list of Tensors");
  c10::ScalarType type = types.front();
  for (c10::ScalarType t : types) type = c10::promoteTypes(type, t);
  at::Tensor out = at::empty({0}, first->options().dtype(type));
  return h2torch::cat_out(tensors, dim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  H2_IMPL(m, "index_select", index_select);
  H2_IMPL(m, "index_select.out", index_select_out);
  H2_IMPL(m, "gather", gather);
  H2_IMPL(m, "gather.out", gather_out);
  H2_IMPL(m, "scatter_add", scatter_add);
  H2_IMPL(m, "scatter_add_", scatter_add_inplace);
  H2_IMPL(m, "scatter_add.out", scatter_add_out);
  H2_IMPL(m, "index_add", index_add);
  H2_IMPL(m, "index_add_", index_add_inplace);
  H2_IMPL(m, "index_add.out", index_add_out);
  H2_IMPL(m, "cat", cat);
  H2_IMPL(m, "cat.out", cat_out);
}

}  // namespace h2torch
