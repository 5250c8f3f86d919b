// Emulated cnnlReduce: sums, means, products, extrema and norms over any set of axes, accumulated in
// double; MAX and MIN propagate NaN and can report the position of the first extremum along a single
// reduced axis.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

constexpr size_t kReduceWorkspace = 256;  // what the emulated query asks for, so callers pass one

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlCreateReduceDescriptor(cnnlReduceDescriptor_t* desc) {
  return call("cnnlCreateReduceDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    *desc = new cnnlReduceStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroyReduceDescriptor(cnnlReduceDescriptor_t desc) {
  return call("cnnlDestroyReduceDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    delete desc;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetReduceDescriptor_v2(cnnlReduceDescriptor_t desc, int axis[], int axis_count,
                                                        cnnlReduceOp_t op, cnnlDataType_t compute_dtype,
                                                        cnnlNanPropagation_t, cnnlReduceIndices_t indices,
                                                        cnnlIndicesType_t indices_type, float p) {
  return call("cnnlSetReduceDescriptor_v2", [&] {
    if (!desc) bad_param("desc is NULL");
    if (axis_count < 1 || axis_count > CNNL_DIM_MAX || !axis) bad_param("axis_count must be in [1, CNNL_DIM_MAX]");
    switch (op) {
      case CNNL_REDUCE_ADD:
      case CNNL_REDUCE_AVG:
      case CNNL_REDUCE_MUL:
      case CNNL_REDUCE_MAX:
      case CNNL_REDUCE_MIN:
      case CNNL_REDUCE_NORM1:
      case CNNL_REDUCE_NORM2:
      case CNNL_REDUCE_NORMP: break;
      default: bad_param("unknown reduce operation " + std::to_string(static_cast<int>(op)));
    }
    if (compute_dtype != CNNL_DTYPE_FLOAT) not_supported("the emulator reduces in FLOAT only");
    if (indices != CNNL_REDUCE_NO_INDICES && op != CNNL_REDUCE_MAX && op != CNNL_REDUCE_MIN)
      bad_param("indices come only with MAX and MIN");
    if (indices_type != CNNL_32BIT_INDICES && indices_type != CNNL_64BIT_INDICES)
      not_supported("only 32- and 64-bit indices are emulated");
    *desc = cnnlReduceStruct{std::vector<int>(axis, axis + axis_count), op, indices, indices_type, p, true};
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetReduceOpWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                          const cnnlTensorDescriptor_t, const cnnlReduceDescriptor_t,
                                                          size_t* size) {
  return call("cnnlGetReduceOpWorkspaceSize", [&] { *checked_size(size) = kReduceWorkspace; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlReduce(cnnlHandle_t handle, const cnnlReduceDescriptor_t desc, void* workspace,
                                        size_t workspace_size, const void* alpha,
                                        const cnnlTensorDescriptor_t input_desc, const void* input,
                                        const size_t indices_size, void* indices, const void* beta,
                                        const cnnlTensorDescriptor_t output_desc, void* output) {
  return call("cnnlReduce", handle, [&](const auto& enqueue) {
    if (!desc || !desc->set) bad_param("the reduce descriptor is NULL or not set");
    if (alpha || beta) bad_param("alpha and beta are reserved: pass NULL");
    if (workspace_size < kReduceWorkspace) bad_param("the workspace is smaller than cnnlGetReduceOpWorkspaceSize says");
    check_workspace(workspace, workspace_size);
    const cnnlReduceStruct r = *desc;
    const Operand in = operand(input_desc, input, "input");
    const bool want_values = r.indices != CNNL_REDUCE_ONLY_INDICES, want_indices = r.indices != CNNL_REDUCE_NO_INDICES;
    const Operand out = want_values ? operand(output_desc, output, "output") : Operand{};
    // The output keeps the input's rank, reduced axes of size 1.
    std::vector<bool> reduced(static_cast<size_t>(in.rank()), false);
    for (int a : r.axes) {
      if (a < 0 || a >= in.rank()) bad_param("axis " + std::to_string(a) + " is outside " + shape_text(in.dims));
      reduced[static_cast<size_t>(a)] = true;
    }
    std::vector<int64_t> kept = in.dims;
    for (size_t d = 0; d < kept.size(); ++d)
      if (reduced[d]) kept[d] = 1;
    if (want_values && (out.dims != kept || out.dtype != in.dtype))
      bad_param("the output must be " + shape_text(kept) + " of the input's dtype, not " + shape_text(out.dims));
    int64_t groups = 1;
    for (int64_t d : kept) groups *= d;
    const size_t index_bytes = r.indices_type == CNNL_64BIT_INDICES ? 8 : 4;
    if (want_indices) {
      if (r.axes.size() != 1) bad_param("indices need exactly one reduced axis");
      if (!indices || indices_size < static_cast<size_t>(groups) * index_bytes ||
          !is_device_memory(indices, indices_size))
        bad_param("indices must be device memory of at least " + std::to_string(groups * index_bytes) + " bytes");
    }
    enqueue([in, out, r, reduced, kept, groups, want_values, want_indices, indices, index_bytes] {
      const std::vector<double> v = read(in);
      const bool extremum = r.op == CNNL_REDUCE_MAX || r.op == CNNL_REDUCE_MIN;
      const double start = r.op == CNNL_REDUCE_MUL   ? 1.0
                           : r.op == CNNL_REDUCE_MAX ? -std::numeric_limits<double>::infinity()
                           : r.op == CNNL_REDUCE_MIN ? std::numeric_limits<double>::infinity()
                                                     : 0.0;
      std::vector<double> acc(static_cast<size_t>(groups), start);
      std::vector<int64_t> position(static_cast<size_t>(groups), 0), seen(static_cast<size_t>(groups), 0);
      // Walk the input in row-major order, tracking each element's group (its index with reduced
      // coordinates dropped) and its coordinate along the reduced axes.
      const size_t rank = in.dims.size();
      std::vector<int64_t> index(rank, 0);
      for (size_t e = 0; e < v.size(); ++e) {
        int64_t group = 0;
        for (size_t d = 0; d < rank; ++d) group = group * kept[d] + (reduced[d] ? 0 : index[d]);
        const size_t g = static_cast<size_t>(group);
        const double x = v[e];
        switch (r.op) {
          case CNNL_REDUCE_ADD:
          case CNNL_REDUCE_AVG: acc[g] += x; break;
          case CNNL_REDUCE_MUL: acc[g] *= x; break;
          case CNNL_REDUCE_NORM1: acc[g] += std::fabs(x); break;
          case CNNL_REDUCE_NORM2: acc[g] += x * x; break;
          case CNNL_REDUCE_NORMP: acc[g] += std::pow(std::fabs(x), static_cast<double>(r.p)); break;
          default: {  // MAX, MIN: the first extremum; the first NaN wins and stays
            const bool take = seen[g] == 0 || (!std::isnan(acc[g]) &&
                                               (std::isnan(x) || (r.op == CNNL_REDUCE_MAX ? x > acc[g] : x < acc[g])));
            if (take) {
              acc[g] = x;
              position[g] = index[static_cast<size_t>(r.axes[0])];
            }
          }
        }
        ++seen[g];
        for (size_t d = rank; d-- > 0;) {
          if (++index[d] < in.dims[d]) break;
          index[d] = 0;
        }
      }
      for (size_t g = 0; g < acc.size(); ++g) {
        if (r.op == CNNL_REDUCE_AVG) acc[g] = seen[g] ? acc[g] / static_cast<double>(seen[g]) : std::nan("");
        if (r.op == CNNL_REDUCE_NORM2) acc[g] = std::sqrt(acc[g]);
        if (r.op == CNNL_REDUCE_NORMP) acc[g] = std::pow(acc[g], 1.0 / static_cast<double>(r.p));
        if (extremum && seen[g] == 0) throw Error(CNNL_STATUS_BAD_PARAM, "MAX and MIN need at least one element");
      }
      if (want_values) write(out, acc);
      if (want_indices) {
        char* at = static_cast<char*>(device_view(indices, position.size() * index_bytes));
        for (size_t g = 0; g < position.size(); ++g) {
          if (index_bytes == 8) {
            std::memcpy(at + g * 8, &position[g], 8);
          } else {
            const int32_t p32 = static_cast<int32_t>(position[g]);
            std::memcpy(at + g * 4, &p32, 4);
          }
        }
      }
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlCreateReduceDescriptor);
H2_CHECK_SIGNATURE(cnnlDestroyReduceDescriptor);
H2_CHECK_SIGNATURE(cnnlSetReduceDescriptor_v2);
H2_CHECK_SIGNATURE(cnnlGetReduceOpWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlReduce);
