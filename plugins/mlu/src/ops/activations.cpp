// gelu and silu on cnnlActivationForward/Backward (GELU's tanh form through the descriptor's
// `approximate`); swiglu composed in FP32 from SILU and products, so silu(gate) * up rounds once.
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

using h2::plugin::guarded;

H2_Status op_gelu(H2_Stream* handle, const H2_GeluArgs* args) {
  return guarded("gelu", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).activation(CNNL_ACTIVATION_GELU, args->approximate != 0, args->y, args->x);
  });
}

H2_Status op_gelu_backward(H2_Stream* handle, const H2_GeluBackwardArgs* args) {
  return guarded("gelu_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).activation_backward(CNNL_ACTIVATION_GELU, args->approximate != 0, args->dx, args->x, args->dy);
  });
}

H2_Status op_silu(H2_Stream* handle, const H2_SiluArgs* args) {
  return guarded("silu", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).activation(CNNL_ACTIVATION_SILU, false, args->y, args->x);
  });
}

H2_Status op_silu_backward(H2_Stream* handle, const H2_SiluBackwardArgs* args) {
  return guarded("silu_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).activation_backward(CNNL_ACTIVATION_SILU, false, args->dx, args->x, args->dy);
  });
}

H2_Status op_swiglu(H2_Stream* handle, const H2_SwigluArgs* args) {
  return guarded("swiglu", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const std::vector<int64_t> shape = shape_of(args->y);
    auto gate = math.scratch(H2_DTYPE_F32, shape), up = math.scratch(H2_DTYPE_F32, shape);
    math.copy(gate->tensor, args->gate);
    math.copy(up->tensor, args->up);
    math.activation(CNNL_ACTIVATION_SILU, false, gate->tensor, gate->tensor);
    math.binary(H2_BINARY_MUL, gate->tensor, gate->tensor, up->tensor);
    math.copy(args->y, gate->tensor);
  });
}

// dup = dy * silu(gate); dgate = (dy * up) * silu'(gate).
H2_Status op_swiglu_backward(H2_Stream* handle, const H2_SwigluBackwardArgs* args) {
  return guarded("swiglu_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const std::vector<int64_t> shape = shape_of(args->dy);
    auto gate = math.scratch(H2_DTYPE_F32, shape), up = math.scratch(H2_DTYPE_F32, shape);
    auto dy = math.scratch(H2_DTYPE_F32, shape), activated = math.scratch(H2_DTYPE_F32, shape);
    math.copy(gate->tensor, args->gate);
    math.copy(up->tensor, args->up);
    math.copy(dy->tensor, args->dy);
    math.activation(CNNL_ACTIVATION_SILU, false, activated->tensor, gate->tensor);
    math.binary(H2_BINARY_MUL, activated->tensor, activated->tensor, dy->tensor);
    math.binary(H2_BINARY_MUL, up->tensor, up->tensor, dy->tensor);
    math.activation_backward(CNNL_ACTIVATION_SILU, false, dy->tensor, gate->tensor, up->tensor);
    math.copy(args->dup, activated->tensor);
    math.copy(args->dgate, dy->tensor);
  });
}

}  // namespace h2::mlu
