// Emulated elementwise CNNL operators: arithmetic on two broadcast operands, scalar transforms, unary
// math, comparisons, selection, fill, casts, strided copies and arange. Each computes in FP32 and
// rounds once to the output's dtype.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

void require_same_dtype(const Operand& a, const Operand& b, const char* what) {
  if (a.dtype != b.dtype) bad_param(std::string(what) + ": " + dtype_text(a.dtype) + " and " + dtype_text(b.dtype));
}

void require_float(const Operand& t, const char* role) {
  if (!is_floating(t.dtype)) not_supported(std::string(role) + " is " + dtype_text(t.dtype) + ", not a float type");
}

// c = f(a, b) with a and b broadcast to c, all of one floating dtype.
template <typename F>
std::function<void()> binary_kernel(const Operand& a, const Operand& b, const Operand& c, F f) {
  require_same_dtype(a, c, "the inputs and output differ in dtype");
  require_same_dtype(b, c, "the inputs and output differ in dtype");
  require_float(c, "the output");
  if (!broadcasts(a.dims, c.dims) || !broadcasts(b.dims, c.dims))
    bad_param("inputs " + shape_text(a.dims) + " and " + shape_text(b.dims) + " do not broadcast to " +
              shape_text(c.dims));
  return [a, b, c, f] {
    const std::vector<double> x = read_broadcast(a, c.dims), y = read_broadcast(b, c.dims);
    std::vector<double> z(x.size());
    for (size_t i = 0; i < z.size(); ++i) z[i] = f(fp32(x[i]), fp32(y[i]));
    write(c, z);
  };
}

template <typename F>
std::function<void()> unary_kernel(const Operand& x, const Operand& y, F f) {
  require_same_dtype(x, y, "input and output differ in dtype");
  require_float(y, "the output");
  if (x.dims != y.dims) bad_param("input " + shape_text(x.dims) + " and output " + shape_text(y.dims) + " differ");
  return [x, y, f] {
    std::vector<double> v = read(x);
    for (double& e : v) e = f(fp32(e));
    write(y, v);
  };
}

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlCreateOpTensorDescriptor(cnnlOpTensorDescriptor_t* desc) {
  return call("cnnlCreateOpTensorDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    *desc = new cnnlOpTensorStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroyOpTensorDescriptor(cnnlOpTensorDescriptor_t desc) {
  return call("cnnlDestroyOpTensorDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    delete desc;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetOpTensorDescriptor(cnnlOpTensorDescriptor_t desc, cnnlOpTensorDesc_t op,
                                                       cnnlDataType_t compute_dtype, cnnlNanPropagation_t /*nan*/) {
  return call("cnnlSetOpTensorDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    if (op != CNNL_OP_TENSOR_ADD && op != CNNL_OP_TENSOR_SUB && op != CNNL_OP_TENSOR_MUL)
      bad_param("unknown operation " + std::to_string(static_cast<int>(op)));
    if (compute_dtype != CNNL_DTYPE_FLOAT) not_supported("the emulator computes in FLOAT only");
    *desc = cnnlOpTensorStruct{op, compute_dtype, true};
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetOpTensorWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                          const cnnlTensorDescriptor_t, const cnnlTensorDescriptor_t,
                                                          size_t* size) {
  return call("cnnlGetOpTensorWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlOpTensor(cnnlHandle_t handle, const cnnlOpTensorDescriptor_t op_desc,
                                          const void* alpha1, const cnnlTensorDescriptor_t a_desc, const void* a,
                                          const void* alpha2, const cnnlTensorDescriptor_t b_desc, const void* b,
                                          void* workspace, size_t workspace_size, const void* beta,
                                          const cnnlTensorDescriptor_t c_desc, void* c) {
  return call("cnnlOpTensor", handle, [&](const auto& enqueue) {
    if (!op_desc || !op_desc->set) bad_param("the operation descriptor is NULL or not set");
    const float s1 = host_float(alpha1, "alpha1"), s2 = host_float(alpha2, "alpha2"), t = host_float(beta, "beta");
    check_workspace(workspace, workspace_size);
    const Operand x = operand(a_desc, a, "a"), y = operand(b_desc, b, "b"), z = operand(c_desc, c, "c");
    const cnnlOpTensorDesc_t op = op_desc->op;
    binary_kernel(x, y, z, [](float, float) { return 0.0f; });  // checks dtypes and shapes
    enqueue([x, y, z, op, s1, s2, t] {
      const std::vector<double> p = read_broadcast(x, z.dims), q = read_broadcast(y, z.dims);
      // beta * c only when beta is not 0: c is not read then (it may hold NaN).
      const std::vector<double> old = t != 0 ? read(z) : std::vector<double>();
      std::vector<double> out(p.size());
      for (size_t i = 0; i < out.size(); ++i) {
        const float l = s1 * fp32(p[i]), r = s2 * fp32(q[i]);
        const float v = op == CNNL_OP_TENSOR_ADD ? l + r : op == CNNL_OP_TENSOR_SUB ? l - r : l * r;
        out[i] = t != 0 ? v + t * fp32(old[i]) : v;
      }
      write(z, out);
    });
  });
}

namespace {

cnnlStatus_t binary_call(const char* name, cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                         const cnnlTensorDescriptor_t y_desc, const void* y, void* workspace, size_t workspace_size,
                         const cnnlTensorDescriptor_t z_desc, void* z, float (*f)(float, float)) {
  return call(name, handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    enqueue(binary_kernel(operand(x_desc, x, "x"), operand(y_desc, y, "y"), operand(z_desc, z, "z"), f));
  });
}

float maximum(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, b);
}
float minimum(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::min(a, b);
}

}  // namespace

CNNL_EMULATOR_C cnnlStatus_t cnnlGetDivWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                     const cnnlTensorDescriptor_t, const cnnlTensorDescriptor_t,
                                                     size_t* size) {
  return call("cnnlGetDivWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDiv_v2(cnnlHandle_t handle, cnnlComputationPreference_t,
                                        const cnnlTensorDescriptor_t x_desc, const void* x,
                                        const cnnlTensorDescriptor_t y_desc, const void* y, void* workspace,
                                        size_t workspace_size, const cnnlTensorDescriptor_t z_desc, void* z) {
  return binary_call("cnnlDiv_v2", handle, x_desc, x, y_desc, y, workspace, workspace_size, z_desc, z,
                     [](float a, float b) { return a / b; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetPowWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                     const cnnlTensorDescriptor_t, const cnnlTensorDescriptor_t,
                                                     size_t* size) {
  return call("cnnlGetPowWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlPow(cnnlHandle_t handle, cnnlComputationPreference_t,
                                     const cnnlTensorDescriptor_t x_desc, const void* x,
                                     const cnnlTensorDescriptor_t y_desc, const void* y, void* workspace,
                                     size_t workspace_size, const cnnlTensorDescriptor_t z_desc, void* z) {
  return binary_call("cnnlPow", handle, x_desc, x, y_desc, y, workspace, workspace_size, z_desc, z,
                     [](float a, float b) { return std::pow(a, b); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetMaximumWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t, size_t* size) {
  return call("cnnlGetMaximumWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMaximum(cnnlHandle_t handle, const cnnlTensorDescriptor_t a_desc, const void* a,
                                         const cnnlTensorDescriptor_t b_desc, const void* b,
                                         const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                         size_t workspace_size) {
  return binary_call("cnnlMaximum", handle, a_desc, a, b_desc, b, workspace, workspace_size, c_desc, c, maximum);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetMinimumWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t, size_t* size) {
  return call("cnnlGetMinimumWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMinimum(cnnlHandle_t handle, const cnnlTensorDescriptor_t a_desc, const void* a,
                                         const cnnlTensorDescriptor_t b_desc, const void* b,
                                         const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                         size_t workspace_size) {
  return binary_call("cnnlMinimum", handle, a_desc, a, b_desc, b, workspace, workspace_size, c_desc, c, minimum);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlTransform_v2(cnnlHandle_t handle, cnnlPointerMode_t mode, const void* alpha,
                                              const cnnlTensorDescriptor_t x_desc, const void* x, const void* beta,
                                              const cnnlTensorDescriptor_t y_desc, void* y) {
  return call("cnnlTransform_v2", handle, [&](const auto& enqueue) {
    if (mode != CNNL_POINTER_MODE_HOST) not_supported("only CNNL_POINTER_MODE_HOST is emulated");
    const float s = host_float(alpha, "alpha"), t = host_float(beta, "beta");
    enqueue(unary_kernel(operand(x_desc, x, "x"), operand(y_desc, y, "y"), [s, t](float v) { return s * v + t; }));
  });
}

namespace {

cnnlStatus_t unary_call(const char* name, cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                        const cnnlTensorDescriptor_t y_desc, void* y, float (*f)(float)) {
  return call(name, handle,
              [&](const auto& enqueue) { enqueue(unary_kernel(operand(x_desc, x, "x"), operand(y_desc, y, "y"), f)); });
}

}  // namespace

CNNL_EMULATOR_C cnnlStatus_t cnnlExp_v2(cnnlHandle_t handle, cnnlComputationPreference_t,
                                        const cnnlTensorDescriptor_t x_desc, const void* x,
                                        const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlExp_v2", handle, x_desc, x, y_desc, y, [](float v) { return std::exp(v); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlLog_v2(cnnlHandle_t handle, cnnlComputationPreference_t, cnnlLogBase_t base,
                                        const cnnlTensorDescriptor_t x_desc, const void* x,
                                        const cnnlTensorDescriptor_t y_desc, void* y) {
  if (base == CNNL_LOG_2)
    return unary_call("cnnlLog_v2", handle, x_desc, x, y_desc, y, [](float v) { return std::log2(v); });
  if (base == CNNL_LOG_10)
    return unary_call("cnnlLog_v2", handle, x_desc, x, y_desc, y, [](float v) { return std::log10(v); });
  return unary_call("cnnlLog_v2", handle, x_desc, x, y_desc, y, [](float v) { return std::log(v); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSqrt_v2(cnnlHandle_t handle, cnnlComputationPreference_t,
                                         const cnnlTensorDescriptor_t x_desc, const void* x,
                                         const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlSqrt_v2", handle, x_desc, x, y_desc, y, [](float v) { return std::sqrt(v); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlRsqrt_v2(cnnlHandle_t handle, cnnlComputationPreference_t,
                                          const cnnlTensorDescriptor_t x_desc, const void* x,
                                          const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlRsqrt_v2", handle, x_desc, x, y_desc, y, [](float v) { return 1.0f / std::sqrt(v); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlNegTensor(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                           const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlNegTensor", handle, x_desc, x, y_desc, y, [](float v) { return -v; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlReciprocal(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                            const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlReciprocal", handle, x_desc, x, y_desc, y, [](float v) { return 1.0f / v; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlAbs(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                     const cnnlTensorDescriptor_t y_desc, void* y) {
  return unary_call("cnnlAbs", handle, x_desc, x, y_desc, y, [](float v) { return std::fabs(v); });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetLogicOpWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                         const cnnlTensorDescriptor_t, const cnnlTensorDescriptor_t,
                                                         size_t* size) {
  return call("cnnlGetLogicOpWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlLogicOp(cnnlHandle_t handle, cnnlLogicOp_t op, const cnnlTensorDescriptor_t a_desc,
                                         const void* a, const cnnlTensorDescriptor_t b_desc, const void* b,
                                         void* workspace, size_t workspace_size, const cnnlTensorDescriptor_t c_desc,
                                         void* c) {
  return call("cnnlLogicOp", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand x = operand(a_desc, a, "a"), y = operand(b_desc, b, "b"), z = operand(c_desc, c, "c");
    require_same_dtype(x, y, "the inputs differ in dtype");
    if (op < CNNL_LOGIC_OP_EQ || op > CNNL_LOGIC_OP_OR) bad_param("unknown logic operation");
    if (!broadcasts(x.dims, z.dims) || !broadcasts(y.dims, z.dims))
      bad_param("inputs " + shape_text(x.dims) + " and " + shape_text(y.dims) + " do not broadcast to " +
                shape_text(z.dims));
    enqueue([x, y, z, op] {
      const std::vector<double> p = read_broadcast(x, z.dims), q = read_broadcast(y, z.dims);
      std::vector<double> out(p.size());
      for (size_t i = 0; i < out.size(); ++i) {
        const double l = p[i], r = q[i];
        bool v = false;
        switch (op) {
          case CNNL_LOGIC_OP_EQ: v = l == r; break;
          case CNNL_LOGIC_OP_NE: v = l != r; break;
          case CNNL_LOGIC_OP_LT: v = l < r; break;
          case CNNL_LOGIC_OP_LE: v = l <= r; break;
          case CNNL_LOGIC_OP_GT: v = l > r; break;
          case CNNL_LOGIC_OP_GE: v = l >= r; break;
          case CNNL_LOGIC_OP_AND: v = l != 0 && r != 0; break;
          case CNNL_LOGIC_OP_OR: v = l != 0 || r != 0; break;
        }
        out[i] = v ? 1 : 0;
      }
      write(z, out);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetSelectV2WorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                          const cnnlTensorDescriptor_t, const cnnlTensorDescriptor_t,
                                                          size_t* size) {
  return call("cnnlGetSelectV2WorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSelectV2(cnnlHandle_t handle, const cnnlTensorDescriptor_t cond_desc, const void* cond,
                                          const cnnlTensorDescriptor_t then_desc, const void* then_value,
                                          const cnnlTensorDescriptor_t else_desc, const void* else_value,
                                          void* workspace, size_t workspace_size, const cnnlTensorDescriptor_t out_desc,
                                          void* out) {
  return call("cnnlSelectV2", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand c = operand(cond_desc, cond, "condition"), t = operand(then_desc, then_value, "then");
    const Operand e = operand(else_desc, else_value, "else"), y = operand(out_desc, out, "out");
    if (c.dtype != CNNL_DTYPE_BOOL) bad_param("the condition is " + dtype_text(c.dtype) + ", not BOOL");
    require_same_dtype(t, y, "then and out differ in dtype");
    require_same_dtype(e, y, "else and out differ in dtype");
    for (const Operand* o : {&c, &t, &e})
      if (!broadcasts(o->dims, y.dims)) bad_param(shape_text(o->dims) + " does not broadcast to " + shape_text(y.dims));
    enqueue([c, t, e, y] {
      const std::vector<double> mask = read_broadcast(c, y.dims), a = read_broadcast(t, y.dims),
                                b = read_broadcast(e, y.dims);
      std::vector<double> v(mask.size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = mask[i] != 0 ? a[i] : b[i];
      write(y, v);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlFill_v3(cnnlHandle_t handle, cnnlPointerMode_t mode, const void* value,
                                         const cnnlTensorDescriptor_t y_desc, void* y) {
  return call("cnnlFill_v3", handle, [&](const auto& enqueue) {
    if (mode != CNNL_POINTER_MODE_HOST) not_supported("only CNNL_POINTER_MODE_HOST is emulated");
    if (!value) bad_param("value is NULL");
    const Operand t = operand(y_desc, y, "y");
    // The host value has y's dtype (float for HALF and BFLOAT16, as the documentation asks).
    double v = 0;
    switch (t.dtype) {
      case CNNL_DTYPE_FLOAT:
      case CNNL_DTYPE_HALF:
      case CNNL_DTYPE_BFLOAT16: v = *static_cast<const float*>(value); break;
      case CNNL_DTYPE_INT32: v = *static_cast<const int32_t*>(value); break;
      case CNNL_DTYPE_INT64: v = static_cast<double>(*static_cast<const int64_t*>(value)); break;
      case CNNL_DTYPE_BOOL:
      case CNNL_DTYPE_UINT8: v = *static_cast<const uint8_t*>(value); break;
      default: not_supported("cnnlFill_v3 of " + dtype_text(t.dtype));
    }
    enqueue([t, v] { write(t, std::vector<double>(static_cast<size_t>(t.count()), v)); });
  });
}

namespace {

// The source and destination dtypes each cast kind converts between.
std::pair<cnnlDataType_t, cnnlDataType_t> cast_dtypes(cnnlCastDataType_t cast) {
  switch (cast) {
    case CNNL_CAST_FLOAT_TO_HALF: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_HALF};
    case CNNL_CAST_HALF_TO_FLOAT: return {CNNL_DTYPE_HALF, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_FLOAT_TO_BFLOAT16: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_BFLOAT16};
    case CNNL_CAST_BFLOAT16_TO_FLOAT: return {CNNL_DTYPE_BFLOAT16, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_FLOAT_TO_INT32: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_INT32};
    case CNNL_CAST_INT32_TO_FLOAT: return {CNNL_DTYPE_INT32, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_FLOAT_TO_INT64: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_INT64};
    case CNNL_CAST_INT64_TO_FLOAT: return {CNNL_DTYPE_INT64, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_FLOAT_TO_BOOL: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_BOOL};
    case CNNL_CAST_BOOL_TO_FLOAT: return {CNNL_DTYPE_BOOL, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_FLOAT_TO_UINT8: return {CNNL_DTYPE_FLOAT, CNNL_DTYPE_UINT8};
    case CNNL_CAST_UINT8_TO_FLOAT: return {CNNL_DTYPE_UINT8, CNNL_DTYPE_FLOAT};
    case CNNL_CAST_INT32_TO_INT64: return {CNNL_DTYPE_INT32, CNNL_DTYPE_INT64};
    case CNNL_CAST_INT64_TO_INT32: return {CNNL_DTYPE_INT64, CNNL_DTYPE_INT32};
  }
  bad_param("unknown cast " + std::to_string(static_cast<int>(cast)));
}

}  // namespace

CNNL_EMULATOR_C cnnlStatus_t cnnlCastDataType(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                              cnnlCastDataType_t cast, const cnnlTensorDescriptor_t y_desc, void* y) {
  return call("cnnlCastDataType", handle, [&](const auto& enqueue) {
    const Operand from = operand(x_desc, x, "x"), to = operand(y_desc, y, "y");
    const auto [source, target] = cast_dtypes(cast);
    if (from.dtype != source || to.dtype != target)
      bad_param("the cast converts " + dtype_text(source) + " to " + dtype_text(target) + ", the tensors are " +
                dtype_text(from.dtype) + " and " + dtype_text(to.dtype));
    if (from.dims != to.dims) bad_param("x " + shape_text(from.dims) + " and y " + shape_text(to.dims) + " differ");
    enqueue([from, to] {
      // NaN to an integer is 0 and floats truncate toward zero (write's rounding for integers).
      write(to, read(from));
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetCopyWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                      const cnnlTensorDescriptor_t, size_t* size) {
  return call("cnnlGetCopyWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlCopy_v2(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc, const void* x,
                                         const cnnlTensorDescriptor_t y_desc, void* y, void* workspace,
                                         size_t workspace_size) {
  return call("cnnlCopy_v2", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand from = operand(x_desc, x, "x"), to = operand(y_desc, y, "y");
    require_same_dtype(from, to, "a copy does not convert");
    if (from.dims != to.dims) bad_param("x " + shape_text(from.dims) + " and y " + shape_text(to.dims) + " differ");
    enqueue([from, to] { write(to, read(from)); });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlArange_v2(cnnlHandle_t handle, cnnlComputationPreference_t, const void* start,
                                           const void* step, const cnnlTensorDescriptor_t out_desc, void* out) {
  return call("cnnlArange_v2", handle, [&](const auto& enqueue) {
    const Operand t = operand(out_desc, out, "out");
    if (t.rank() != 1) bad_param("out must be 1-D, not " + shape_text(t.dims));
    double first = 0, by = 0;
    if (is_floating(t.dtype)) {
      first = host_float(start, "start");
      by = host_float(step, "step");
    } else if (t.dtype == CNNL_DTYPE_INT32) {
      if (!start || !step) bad_param("start or step is NULL");
      first = *static_cast<const int32_t*>(start);
      by = *static_cast<const int32_t*>(step);
    } else {
      not_supported("cnnlArange_v2 of " + dtype_text(t.dtype));
    }
    enqueue([t, first, by] {
      std::vector<double> v(static_cast<size_t>(t.count()));
      // start + i * step in FP32, as the device computes it.
      for (size_t i = 0; i < v.size(); ++i) v[i] = fp32(first) + static_cast<float>(i) * fp32(by);
      write(t, v);
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlCreateOpTensorDescriptor);
H2_CHECK_SIGNATURE(cnnlDestroyOpTensorDescriptor);
H2_CHECK_SIGNATURE(cnnlSetOpTensorDescriptor);
H2_CHECK_SIGNATURE(cnnlGetOpTensorWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlOpTensor);
H2_CHECK_SIGNATURE(cnnlGetDivWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlDiv_v2);
H2_CHECK_SIGNATURE(cnnlGetPowWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlPow);
H2_CHECK_SIGNATURE(cnnlGetMaximumWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlMaximum);
H2_CHECK_SIGNATURE(cnnlGetMinimumWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlMinimum);
H2_CHECK_SIGNATURE(cnnlTransform_v2);
H2_CHECK_SIGNATURE(cnnlExp_v2);
H2_CHECK_SIGNATURE(cnnlLog_v2);
H2_CHECK_SIGNATURE(cnnlSqrt_v2);
H2_CHECK_SIGNATURE(cnnlRsqrt_v2);
H2_CHECK_SIGNATURE(cnnlNegTensor);
H2_CHECK_SIGNATURE(cnnlReciprocal);
H2_CHECK_SIGNATURE(cnnlAbs);
H2_CHECK_SIGNATURE(cnnlGetLogicOpWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlLogicOp);
H2_CHECK_SIGNATURE(cnnlGetSelectV2WorkspaceSize);
H2_CHECK_SIGNATURE(cnnlSelectV2);
H2_CHECK_SIGNATURE(cnnlFill_v3);
H2_CHECK_SIGNATURE(cnnlCastDataType);
H2_CHECK_SIGNATURE(cnnlGetCopyWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlCopy_v2);
H2_CHECK_SIGNATURE(cnnlArange_v2);
