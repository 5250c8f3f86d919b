#include "kernels.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>

#include <mutex>

namespace h2torch {

int one_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  return one_device(op, std::span<const at::Tensor* const>(tensors.begin(), tensors.size()));
}

int one_device(const char* op, std::span<const at::Tensor* const> tensors) {
  int index = -1;
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || (t->device().is_cpu() && t->dim() == 0)) continue;
    TORCH_CHECK(t->device().type() == c10::DeviceType::PrivateUse1, op, ": expected all tensors on one H2 device, ",
                "found ", t->device(), " (move it with .to('privateuseone'))");
    TORCH_CHECK(index < 0 || index == t->device().index(), op, ": expected all tensors on one device, found ",
                "privateuseone:", index, " and privateuseone:", static_cast<int>(t->device().index()));
    index = t->device().index();
  }
  TORCH_CHECK(index >= 0, op, ": no operand is on an H2 device");
  return index;
}

h2::Tensor operand(const at::Tensor& t, c10::ScalarType type) {
  return as_h2(t.scalar_type() == type ? t : t.to(type));
}

h2::Tensor operand(const at::Tensor& t, c10::ScalarType type, c10::IntArrayRef shape) {
  return operand(t, type).expand(shape_of(shape));
}

at::Tensor wrapped(const c10::Scalar& value) {
  at::Tensor t = at::scalar_tensor(value, at::kDouble);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

std::vector<int64_t> broadcast_out(const char* op, std::initializer_list<const at::Tensor*> inputs, at::Tensor& out) {
  std::vector<const at::Tensor*> all(inputs);
  all.push_back(&out);
  one_device(op, all);
  std::vector<int64_t> shape;
  for (const at::Tensor* t : inputs) shape = at::infer_size(shape, t->sizes());
  resize_out(out, shape);
  return shape;
}

void resize_out(const at::Tensor& out, c10::IntArrayRef shape) {
  at::native::resize_output(out, shape);
}

std::vector<int> normalized_dims(c10::IntArrayRef dims, int64_t rank) {
  std::vector<int> result;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) result.push_back(static_cast<int>(d));
    return result;
  }
  for (int64_t d : dims) result.push_back(static_cast<int>(c10::maybe_wrap_dim(d, rank)));
  return result;
}

void check_floating(const char* op, const at::Tensor& t) {
  TORCH_CHECK(c10::isFloatingType(t.scalar_type()), op, ": expected a floating-point tensor, got ", t.scalar_type());
}

h2::ops::Philox next_philox() {
  at::CPUGeneratorImpl* generator =
      at::get_generator_or_default<at::CPUGeneratorImpl>(c10::nullopt, at::detail::getDefaultCPUGenerator());
  std::lock_guard lock(generator->mutex_);
  return {generator->random64(), 0};
}

}  // namespace h2torch
