// What DiTorch's operator kernels share: finding the one H2 device of an operator's tensors, viewing
// LibTorch tensors as H2 operands (converted and broadcast), sizing `out` tensors, the random stream
// of each device, and the wrapper that turns H2's errors into LibTorch's.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bridge.hpp"
#include "h2torch/h2torch.hpp"

namespace h2torch {

// The index of the H2 device all of `tensors` are on (CPU 0-dim tensors, which are scalars, and
// undefined tensors aside): an error naming `op` when one is elsewhere or two H2 devices are mixed.
int one_device(const char* op, std::initializer_list<const at::Tensor*> tensors);
int one_device(const char* op, std::span<const at::Tensor* const> tensors);

inline c10::Device h2_device(int index) {
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)};
}
inline h2::Stream& stream_of(const at::Tensor& t) {
  return stream(t.device().index());
}
inline h2::Shape shape_of(c10::IntArrayRef sizes) {
  return {sizes.begin(), sizes.end()};
}

// `t` as an H2 operand of `type` (converted on the device when its dtype differs), broadcast to
// `shape` when one is given.
h2::Tensor operand(const at::Tensor& t, c10::ScalarType type);
h2::Tensor operand(const at::Tensor& t, c10::ScalarType type, c10::IntArrayRef shape);

// A Python number as LibTorch passes it: a CPU 0-dim tensor that does not take part in promotion.
at::Tensor wrapped(const c10::Scalar& value);

// The start of an operator whose inputs broadcast into `out`: all on one H2 device (named by `op`
// when not), `out` resized to their broadcast shape, which is returned.
std::vector<int64_t> broadcast_out(const char* op, std::initializer_list<const at::Tensor*> inputs, at::Tensor& out);

// `out` resized to `shape` (as LibTorch's out= kernels do: a warning when a non-empty out is resized).
void resize_out(const at::Tensor& out, c10::IntArrayRef shape);
// `dims` (negative counting from the end) normalised for a tensor of `rank`; all dims when empty.
std::vector<int> normalized_dims(c10::IntArrayRef dims, int64_t rank);

// Floating-point dtypes only (which of them a plugin supports, its capability says: H2's operator
// checks name it).
void check_floating(const char* op, const at::Tensor& t);

// The Philox stream of one random operator (any device, any size): a fresh key drawn from LibTorch's
// default CPU generator at offset 0, so that torch.manual_seed makes H2's random operators repeat
// exactly as the CPU's do (each H2 draw advances the CPU generator by one 64-bit number).
h2::ops::Philox next_philox();

// A kernel whose H2 errors (bad shapes, dtypes a plugin does not support) become LibTorch errors,
// which PyTorch raises as RuntimeError with H2's message.
template <auto F>
struct Guarded;
template <typename R, typename... A, R (*F)(A...)>
struct Guarded<F> {
  static R call(A... args) {
    try {
      return F(std::forward<A>(args)...);
    } catch (const h2::Error& e) {
      TORCH_CHECK(false, "H2: ", e.what());
    }
  }
};

}  // namespace h2torch

// Registers `fn` for the aten overload `name` on PrivateUse1, its H2 errors translated.
#define H2_IMPL(m, name, fn) (m).impl(name, TORCH_FN(::h2torch::Guarded<&fn>::call))
