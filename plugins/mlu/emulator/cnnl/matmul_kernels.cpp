// Emulated matrix multiplication: cnnlMatMul_v2 (2-D, d = alpha op(a) op(b) + beta c) and
// cnnlBatchMatMulBCast_v2 (batched with broadcast batch dimensions), with their descriptor, algorithm
// and heuristic objects. Products accumulate in FP32 as the MLU's tensor cores do, from FP32 inputs
// (or TF32-rounded ones when the descriptor allows TF32), and round once to the output's dtype.
#include <bit>
#include <cstring>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

constexpr size_t kMatMulWorkspace = 1024;  // what the emulated heuristic asks for, so callers pass one

// FP32 with the mantissa cut to TF32's 10 bits (round to nearest even).
float tf32(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  bits += 0xfffu + ((bits >> 13) & 1u);
  return std::bit_cast<float>(bits & 0xffffe000u);
}

struct Product {
  bool transpose_a, transpose_b, tf32_inputs;
  float alpha, beta;
};

// The matrices of one batch: a [m, k] (or [k, m] transposed) at a_off, b [k, n] (or [n, k]) at b_off,
// into c [m, n] at c_off, all row-major within the read values. The operands are first laid out as
// rows of op(a) and columns of op(b) in FP32 (TF32-rounded when allowed), so each product is a dot
// product over contiguous memory, summed in order.
void multiply(const Product& p, const std::vector<double>& a, size_t a_off, const std::vector<double>& b, size_t b_off,
              std::vector<double>& c, size_t c_off, const std::vector<double>* old, int64_t m, int64_t n, int64_t k) {
  auto in = [&](double v) { return p.tf32_inputs ? tf32(fp32(v)) : fp32(v); };
  std::vector<float> rows(static_cast<size_t>(m * k)), columns(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      rows[static_cast<size_t>(i * k + l)] = in(a[a_off + static_cast<size_t>(p.transpose_a ? l * m + i : i * k + l)]);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l)
      columns[static_cast<size_t>(j * k + l)] =
          in(b[b_off + static_cast<size_t>(p.transpose_b ? j * k + l : l * n + j)]);
  for (int64_t i = 0; i < m; ++i) {
    const float* row = rows.data() + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* column = columns.data() + j * k;
      float sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += row[l] * column[l];
      const size_t at = c_off + static_cast<size_t>(i * n + j);
      float result = p.alpha * sum;
      if (old) result += p.beta * fp32((*old)[at]);
      c[at] = result;
    }
  }
}

void check_matmul_objects(const cnnlMatMulDescriptor_t desc, const cnnlMatMulAlgo_t algo, size_t workspace_size,
                          const void* workspace) {
  if (!desc) bad_param("the matmul descriptor is NULL");
  if (!algo || !algo->chosen) bad_param("the algorithm was not chosen (cnnlGet*HeuristicResult)");
  if (workspace_size < kMatMulWorkspace) bad_param("the workspace is smaller than the heuristic result says");
  check_workspace(workspace, workspace_size);
  if (desc->compute != CNNL_DTYPE_FLOAT) not_supported("the emulator multiplies with a FLOAT compute type only");
}

// The matrix dims of an operand: its last two.
std::pair<int64_t, int64_t> matrix(const Operand& t, const char* role) {
  if (t.rank() < 2) bad_param(std::string(role) + " " + shape_text(t.dims) + " is not a matrix");
  return {t.dims[t.dims.size() - 2], t.dims.back()};
}

cnnlStatus_t heuristic(const char* name, cnnlMatMulHeuristicResult_t results[], int requested, int* returned) {
  return call(name, [&] {
    if (!results || !returned || requested < 1) bad_param("results, returned or the count is invalid");
    if (!results[0]) bad_param("results[0] was not created");
    results[0]->filled = true;
    *returned = 1;
  });
}

cnnlStatus_t heuristic_result(const char* name, cnnlMatMulHeuristicResult_t result, cnnlMatMulAlgo_t algo,
                              size_t* workspace_size) {
  return call(name, [&] {
    if (!result || !result->filled) bad_param("the heuristic result is not filled");
    if (!algo || !workspace_size) bad_param("algo or workspace_size is NULL");
    algo->chosen = true;
    *workspace_size = kMatMulWorkspace;
  });
}

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlMatMulDescCreate(cnnlMatMulDescriptor_t* desc) {
  return call("cnnlMatMulDescCreate", [&] {
    if (!desc) bad_param("desc is NULL");
    *desc = new cnnlMatMulStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMatMulDescDestroy(cnnlMatMulDescriptor_t desc) {
  return call("cnnlMatMulDescDestroy", [&] {
    if (!desc) bad_param("desc is NULL");
    delete desc;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetMatMulDescAttr(cnnlMatMulDescriptor_t desc, cnnlMatMulDescAttribute_t attr,
                                                   const void* buffer, size_t size) {
  return call("cnnlSetMatMulDescAttr", [&] {
    if (!desc || !buffer) bad_param("desc or buffer is NULL");
    if (size != sizeof(int32_t)) bad_param("attribute values are 4 bytes");
    int32_t value = 0;
    std::memcpy(&value, buffer, sizeof value);
    switch (attr) {
      case CNNL_MATMUL_DESC_TRANSA: desc->transpose_a = value != 0; break;
      case CNNL_MATMUL_DESC_TRANSB: desc->transpose_b = value != 0; break;
      case CNNL_MATMUL_USE_BETA: desc->use_beta = value != 0; break;
      case CNNL_MATMUL_ALLOW_TF32: desc->allow_tf32 = value != 0; break;
      case CNNL_MATMUL_DESC_COMPUTE_TYPE: desc->compute = static_cast<cnnlDataType_t>(value); break;
      default: bad_param("unknown attribute " + std::to_string(static_cast<int>(attr)));
    }
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMatMulAlgoCreate(cnnlMatMulAlgo_t* algo) {
  return call("cnnlMatMulAlgoCreate", [&] {
    if (!algo) bad_param("algo is NULL");
    *algo = new cnnlMatMulAlgoStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMatMulAlgoDestroy(cnnlMatMulAlgo_t algo) {
  return call("cnnlMatMulAlgoDestroy", [&] {
    if (!algo) bad_param("algo is NULL");
    delete algo;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlCreateMatMulHeuristicResult(cnnlMatMulHeuristicResult_t* result) {
  return call("cnnlCreateMatMulHeuristicResult", [&] {
    if (!result) bad_param("result is NULL");
    *result = new cnnlMatMulHeuristicResult();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroyMatMulHeuristicResult(cnnlMatMulHeuristicResult_t result) {
  return call("cnnlDestroyMatMulHeuristicResult", [&] {
    if (!result) bad_param("result is NULL");
    delete result;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetMatMulAlgoHeuristic(cnnlHandle_t, cnnlMatMulDescriptor_t desc,
                                                        cnnlTensorDescriptor_t, cnnlTensorDescriptor_t,
                                                        cnnlTensorDescriptor_t, cnnlTensorDescriptor_t,
                                                        cnnlMatMulPrefer_t, int requested,
                                                        cnnlMatMulHeuristicResult_t results[], int* returned) {
  if (!desc) return call("cnnlGetMatMulAlgoHeuristic", [] { bad_param("desc is NULL"); });
  return heuristic("cnnlGetMatMulAlgoHeuristic", results, requested, returned);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetMatMulHeuristicResult(cnnlMatMulHeuristicResult_t result, cnnlMatMulAlgo_t algo,
                                                          size_t* workspace_size) {
  return heuristic_result("cnnlGetMatMulHeuristicResult", result, algo, workspace_size);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetBatchMatMulAlgoHeuristic(cnnlHandle_t, cnnlMatMulDescriptor_t desc,
                                                             cnnlTensorDescriptor_t, cnnlTensorDescriptor_t,
                                                             cnnlTensorDescriptor_t, cnnlMatMulPrefer_t, int requested,
                                                             cnnlMatMulHeuristicResult_t results[], int* returned) {
  if (!desc) return call("cnnlGetBatchMatMulAlgoHeuristic", [] { bad_param("desc is NULL"); });
  return heuristic("cnnlGetBatchMatMulAlgoHeuristic", results, requested, returned);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetBatchMatMulHeuristicResult(cnnlMatMulHeuristicResult_t result,
                                                               cnnlMatMulAlgo_t algo, size_t* workspace_size) {
  return heuristic_result("cnnlGetBatchMatMulHeuristicResult", result, algo, workspace_size);
}

CNNL_EMULATOR_C cnnlStatus_t cnnlMatMul_v2(cnnlHandle_t handle, const cnnlMatMulDescriptor_t desc,
                                           const cnnlMatMulAlgo_t algo, const void* alpha,
                                           const cnnlTensorDescriptor_t a_desc, const void* a,
                                           const cnnlTensorDescriptor_t b_desc, const void* b, const void* beta,
                                           const cnnlTensorDescriptor_t c_desc, void* c, void* workspace,
                                           size_t workspace_size, const cnnlTensorDescriptor_t d_desc, void* d) {
  return call("cnnlMatMul_v2", handle, [&](const auto& enqueue) {
    check_matmul_objects(desc, algo, workspace_size, workspace);
    const Operand x = operand(a_desc, a, "a"), y = operand(b_desc, b, "b"), out = operand(d_desc, d, "d");
    const Operand old = desc->use_beta ? operand(c_desc, c, "c") : Operand{};
    if (x.rank() != 2 || y.rank() != 2 || out.rank() != 2) bad_param("cnnlMatMul_v2 multiplies 2-D tensors");
    if (x.dtype != y.dtype || x.dtype != out.dtype || !is_floating(x.dtype)) bad_param("a, b and d differ in dtype");
    const auto [ar, ac] = matrix(x, "a");
    const auto [br, bc] = matrix(y, "b");
    const int64_t m = desc->transpose_a ? ac : ar, k = desc->transpose_a ? ar : ac;
    const int64_t k2 = desc->transpose_b ? bc : br, n = desc->transpose_b ? br : bc;
    if (k != k2 || out.dims != std::vector<int64_t>{m, n})
      bad_param("op(a) " + shape_text({m, k}) + " times op(b) " + shape_text({k2, n}) + " is not d " +
                shape_text(out.dims));
    if (old.data && (old.dims != out.dims || old.dtype != out.dtype)) bad_param("c must have d's shape and dtype");
    const Product p{desc->transpose_a, desc->transpose_b, desc->allow_tf32 && x.dtype == CNNL_DTYPE_FLOAT,
                    host_float(alpha, "alpha"), host_float(beta, "beta")};
    enqueue([x, y, out, old, p, m, n, k] {
      const std::vector<double> av = read(x), bv = read(y);
      const std::vector<double> cv = old.data && p.beta != 0 ? read(old) : std::vector<double>();
      std::vector<double> dv(static_cast<size_t>(m * n));
      multiply(p, av, 0, bv, 0, dv, 0, cv.empty() ? nullptr : &cv, m, n, k);
      write(out, dv);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlBatchMatMulBCast_v2(cnnlHandle_t handle, const cnnlMatMulDescriptor_t desc,
                                                     const cnnlMatMulAlgo_t algo, const void* alpha,
                                                     const cnnlTensorDescriptor_t a_desc, const void* a,
                                                     const cnnlTensorDescriptor_t b_desc, const void* b,
                                                     const void* beta, const cnnlTensorDescriptor_t c_desc, void* c,
                                                     void* workspace, size_t workspace_size) {
  return call("cnnlBatchMatMulBCast_v2", handle, [&](const auto& enqueue) {
    check_matmul_objects(desc, algo, workspace_size, workspace);
    const Operand x = operand(a_desc, a, "a"), y = operand(b_desc, b, "b"), out = operand(c_desc, c, "c");
    if (x.dtype != y.dtype || x.dtype != out.dtype || !is_floating(x.dtype)) bad_param("a, b and c differ in dtype");
    const auto [ar, ac] = matrix(x, "a");
    const auto [br, bc] = matrix(y, "b");
    const auto [cr, cc] = matrix(out, "c");
    const int64_t m = desc->transpose_a ? ac : ar, k = desc->transpose_a ? ar : ac;
    const int64_t k2 = desc->transpose_b ? bc : br, n = desc->transpose_b ? br : bc;
    if (k != k2 || cr != m || cc != n)
      bad_param("op(a) " + shape_text({m, k}) + " times op(b) " + shape_text({k2, n}) + " is not c's matrices " +
                shape_text({cr, cc}));
    // The batch dims of a and b broadcast to c's.
    const std::vector<int64_t> batch(out.dims.begin(), out.dims.end() - 2);
    auto expanded = [&](const Operand& t, int64_t rows, int64_t cols, const char* role) {
      std::vector<int64_t> t_batch(t.dims.begin(), t.dims.end() - 2);
      if (!broadcasts(t_batch, batch))
        bad_param(std::string(role) + "'s batch dims " + shape_text(t_batch) + " do not broadcast to " +
                  shape_text(batch));
      std::vector<int64_t> shape = batch;
      shape.push_back(rows);
      shape.push_back(cols);
      return shape;
    };
    const std::vector<int64_t> a_shape = expanded(x, ar, ac, "a"), b_shape = expanded(y, br, bc, "b");
    const Product p{desc->transpose_a, desc->transpose_b, desc->allow_tf32 && x.dtype == CNNL_DTYPE_FLOAT,
                    host_float(alpha, "alpha"), host_float(beta, "beta")};
    enqueue([x, y, out, p, m, n, k, a_shape, b_shape] {
      const std::vector<double> av = read_broadcast(x, a_shape), bv = read_broadcast(y, b_shape);
      const std::vector<double> cv = p.beta != 0 ? read(out) : std::vector<double>();
      std::vector<double> dv(static_cast<size_t>(out.count()));
      const int64_t batches = out.count() / (m * n);
      for (int64_t i = 0; i < batches; ++i)
        multiply(p, av, static_cast<size_t>(i * m * k), bv, static_cast<size_t>(i * k * n), dv,
                 static_cast<size_t>(i * m * n), cv.empty() ? nullptr : &cv, m, n, k);
      write(out, dv);
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlMatMulDescCreate);
H2_CHECK_SIGNATURE(cnnlMatMulDescDestroy);
H2_CHECK_SIGNATURE(cnnlSetMatMulDescAttr);
H2_CHECK_SIGNATURE(cnnlMatMulAlgoCreate);
H2_CHECK_SIGNATURE(cnnlMatMulAlgoDestroy);
H2_CHECK_SIGNATURE(cnnlCreateMatMulHeuristicResult);
H2_CHECK_SIGNATURE(cnnlDestroyMatMulHeuristicResult);
H2_CHECK_SIGNATURE(cnnlGetMatMulAlgoHeuristic);
H2_CHECK_SIGNATURE(cnnlGetMatMulHeuristicResult);
H2_CHECK_SIGNATURE(cnnlGetBatchMatMulAlgoHeuristic);
H2_CHECK_SIGNATURE(cnnlGetBatchMatMulHeuristicResult);
H2_CHECK_SIGNATURE(cnnlMatMul_v2);
H2_CHECK_SIGNATURE(cnnlBatchMatMulBCast_v2);
