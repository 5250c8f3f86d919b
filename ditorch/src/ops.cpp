// The PrivateUse1 kernels every tensor needs: the factories and views (empty, empty_strided,
// as_strided, view, _reshape_alias, resize_), copies between the CPU and H2 devices and between H2
// devices (of one plugin or of two), item(), fill_ and arange. Work on a device goes to its one stream in
// order; a copy to the CPU waits for it.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "bridge.hpp"
#include "h2torch/h2torch.hpp"

namespace h2torch {

h2::DType h2_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return h2::DType::f32;
    case c10::ScalarType::Half: return h2::DType::f16;
    case c10::ScalarType::BFloat16: return h2::DType::bf16;
    case c10::ScalarType::Double: return h2::DType::f64;
    case c10::ScalarType::Int: return h2::DType::i32;
    case c10::ScalarType::Long: return h2::DType::i64;
    case c10::ScalarType::Byte: return h2::DType::u8;
    case c10::ScalarType::Bool: return h2::DType::boolean;
    default: TORCH_CHECK(false, "H2 has no dtype for ", type, " (it has f32, f16, bf16, f64, i32, i64, u8, bool)");
  }
}

h2::Tensor as_h2(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "not an H2 tensor: ", t.device());
  auto* holder = static_cast<std::shared_ptr<h2::DeviceBuffer>*>(t.storage().data_ptr().get_context());
  TORCH_CHECK(holder != nullptr, "an H2 tensor without H2 memory (empty storage)");
  const h2::Shape shape(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  return h2::Tensor::from_buffer(*holder, t.storage_offset(), h2_dtype(t.scalar_type()), shape, strides);
}

namespace {

c10::DispatchKeySet h2_keys() {
  return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

int index_of(const c10::optional<c10::Device>& where) {
  const c10::Device d = where.value_or(c10::Device(c10::DeviceType::PrivateUse1, 0));
  return d.has_index() ? d.index() : 0;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, c10::optional<c10::ScalarType> dtype,
                               c10::optional<c10::Layout> layout, c10::optional<c10::Device> where,
                               c10::optional<bool> /*pin_memory*/, c10::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == c10::Layout::Strided, "H2 tensors are strided, not ", *layout);
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(where)));
  const c10::ScalarType type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  h2_dtype(type);
  return at::detail::empty_generic(size, torch_allocator(), h2_keys(), type, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, c10::optional<c10::ScalarType> dtype,
                         c10::optional<c10::Layout> layout, c10::optional<c10::Device> where,
                         c10::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout || *layout == c10::Layout::Strided, "H2 tensors are strided, not ", *layout);
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(where)));
  const c10::ScalarType type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  h2_dtype(type);
  return at::detail::empty_strided_generic(size, stride, torch_allocator(), h2_keys(), type);
}

// `t` as a contiguous CPU tensor of `type` holding its values (waits for the device).
at::Tensor to_cpu(const at::Tensor& t, c10::ScalarType type) {
  const int index = t.device().index();
  h2::Stream& s = stream(index);
  h2::Tensor view = as_h2(t);
  if (!view.is_contiguous() || view.dtype() != h2_dtype(type)) {
    h2::Tensor packed = h2::Tensor::empty(s, view.shape(), h2_dtype(type));
    h2::ops::copy(s, view, packed);
    view = packed;
  }
  at::Tensor host = at::empty(t.sizes(), at::TensorOptions().dtype(type));
  if (host.numel() > 0)
    s.copy_to_host(host.data_ptr(), *view.buffer(), host.nbytes(), view.offset() * host.element_size());
  s.synchronize();
  return host;
}

// self (CPU or H2) copied into dst (H2 or CPU), converting dtype and layout.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  TORCH_CHECK(self.sizes() == dst.sizes(), "copy between tensors of sizes ", self.sizes(), " and ", dst.sizes());
  if (dst.numel() == 0) return dst;
  const bool from_h2 = self.device().type() == c10::DeviceType::PrivateUse1;
  const bool to_h2 = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (from_h2 && !to_h2) {
    dst.copy_(to_cpu(self, self.scalar_type()));
    return dst;
  }
  TORCH_CHECK(to_h2, "DiTorch copies to or from an H2 device, not from ", self.device(), " to ", dst.device());
  const int index = dst.device().index();
  h2::Stream& s = stream(index);
  const h2::Tensor target = as_h2(dst);
  if (from_h2 && self.device() == dst.device()) {
    h2::ops::copy(s, as_h2(self), target);
    return dst;
  }
  // From the CPU, or from another H2 device (possibly another plugin): through host memory.
  const at::Tensor host = from_h2 ? to_cpu(self, dst.scalar_type()) : self.to(dst.scalar_type()).contiguous();
  h2::Tensor staged = target.is_contiguous() ? target : h2::Tensor::empty(s, target.shape(), target.dtype());
  s.copy_from_host(*staged.buffer(), host.data_ptr(), host.nbytes(), staged.offset() * host.element_size());
  if (!target.is_contiguous()) h2::ops::copy(s, staged, target);
  s.synchronize();  // the host tensor is a temporary
  return dst;
}

// self resized in place: its storage grows (keeping what it held) when the new size needs more.
// Freeing the old buffer after the copy is enqueued is safe: the caching allocator reuses it only for
// work ordered after the copy on the device's stream.
const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size, c10::optional<c10::MemoryFormat> format) {
  TORCH_CHECK(!format || *format == c10::MemoryFormat::Contiguous || *format == c10::MemoryFormat::Preserve,
              "resize_: H2 tensors are contiguous or strided views, not ", *format);
  const c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const int64_t elements = self.storage_offset() + c10::multiply_integers(size);
  const auto needed = static_cast<size_t>(elements) * self.element_size();
  if (self.storage().nbytes() < needed) {
    // The storage itself grows (as LibTorch's resize_ does), so other views of it see the new memory.
    c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
    at::DataPtr grown = torch_allocator()->allocate(needed);
    if (storage->nbytes() > 0) {
      const auto* old = static_cast<std::shared_ptr<h2::DeviceBuffer>*>(storage->data_ptr().get_context());
      auto* fresh = static_cast<std::shared_ptr<h2::DeviceBuffer>*>(grown.get_context());
      stream(self.device().index()).copy(**fresh, 0, **old, 0, storage->nbytes());
    }
    storage->set_data_ptr_noswap(std::move(grown));
    storage->set_nbytes(needed);
  }
  impl->set_sizes_contiguous(size);
  return self;
}

// dst resized to self's sizes if needed (the CPU fallback's outputs), then self copied into it.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) h2torch::resize(dst, self.sizes(), c10::nullopt);
  return copy_from(self, dst, false);
}

// item(): the element, read back (waits for the device).
c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  return to_cpu(self, self.scalar_type()).item();
}

// start, start + step, ... below end (above it for a negative step), as LibTorch's arange.
at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out) {
  const double first = start.toDouble(), last = end.toDouble(), increment = step.toDouble();
  TORCH_CHECK(increment != 0, "arange: step must be nonzero");
  TORCH_CHECK((increment > 0 && last >= first) || (increment < 0 && last <= first),
              "arange: upper bound and larger bound inconsistent with step sign");
  const auto size =
      c10::isIntegralType(out.scalar_type(), true)
          ? static_cast<int64_t>((end.toLong() - start.toLong() + step.toLong() - (step.toLong() > 0 ? 1 : -1)) /
                                 step.toLong())
          : static_cast<int64_t>(std::ceil((last - first) / increment));
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, {size});
  if (size > 0) h2::ops::arange(stream(out.device().index()), as_h2(out), first, increment);
  return out;
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() > 0) h2::ops::fill(stream(self.device().index()), as_h2(self), value.toDouble());
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero(at::Tensor& self) {
  return fill_scalar(self, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero));
}

}  // namespace h2torch
