// Emulated indexing: embedding forward and backward, index_select, gather and scatter. An index out of
// range fails the kernel when it runs (the queue reports it), as on the device.
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

constexpr size_t kEmbeddingBackwardWorkspace = 512;

void require_index(const Operand& t, const char* role) {
  if (t.dtype != CNNL_DTYPE_INT32 && t.dtype != CNNL_DTYPE_INT64)
    bad_param(std::string(role) + " is " + dtype_text(t.dtype) + ", not INT32 or INT64");
}

int64_t checked_index(double value, int64_t size, const char* what) {
  const int64_t i = static_cast<int64_t>(value);
  if (i < 0 || i >= size)
    throw Error(CNNL_STATUS_EXECUTION_FAILED,
                std::string(what) + " " + std::to_string(i) + " is outside [0, " + std::to_string(size) + ")");
  return i;
}

// Row-major strides of `dims`.
std::vector<int64_t> contiguous(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

// For each element p of `shape` (row-major), its linear index in `target` with coordinate `dim`
// replaced by `replacement(p)`.
template <typename Replacement>
std::vector<int64_t> remapped(const std::vector<int64_t>& shape, const std::vector<int64_t>& target, int dim,
                              Replacement replacement) {
  const std::vector<int64_t> target_strides = contiguous(target);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<int64_t> out(static_cast<size_t>(count));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t p = 0; p < count; ++p) {
    int64_t linear = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      linear += (static_cast<int>(d) == dim ? replacement(p) : index[d]) * target_strides[d];
    out[static_cast<size_t>(p)] = linear;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

void check_dim(int dim, const Operand& t) {
  if (dim < 0 || dim >= t.rank()) bad_param("dim " + std::to_string(dim) + " is outside " + shape_text(t.dims));
}

// indices/src of `t`'s rank, no larger than `t` in every dimension but `dim`.
void check_fits(const Operand& index, const Operand& t, int dim, const char* role) {
  if (index.rank() != t.rank()) bad_param(std::string(role) + " must have the rank of " + shape_text(t.dims));
  for (int d = 0; d < t.rank(); ++d)
    if (d != dim && index.dims[static_cast<size_t>(d)] > t.dims[static_cast<size_t>(d)])
      bad_param(std::string(role) + " " + shape_text(index.dims) + " is larger than " + shape_text(t.dims) +
                " outside dim " + std::to_string(dim));
}

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlEmbeddingForward_v2(cnnlHandle_t handle, const cnnlTensorDescriptor_t weight_desc,
                                                     const void* weight, const cnnlTensorDescriptor_t indices_desc,
                                                     const void* indices, int padding_idx, const void* max_norm,
                                                     const void* norm_type, const cnnlTensorDescriptor_t output_desc,
                                                     void* output) {
  return call("cnnlEmbeddingForward_v2", handle, [&](const auto& enqueue) {
    if (max_norm || norm_type) not_supported("max_norm is not emulated");
    (void)padding_idx;  // the forward reads the padding row like any other
    const Operand w = operand(weight_desc, weight, "weight"), idx = operand(indices_desc, indices, "indices");
    const Operand out = operand(output_desc, output, "output");
    require_index(idx, "indices");
    std::vector<int64_t> expected = idx.dims;
    if (w.rank() != 2) bad_param("weight must be [vocab, dim]");
    expected.push_back(w.dims[1]);
    if (out.dims != expected || out.dtype != w.dtype)
      bad_param("output must be " + shape_text(expected) + " of the weight's dtype, not " + shape_text(out.dims));
    enqueue([w, idx, out] {
      const std::vector<double> table = read(w), which = read(idx);
      const int64_t vocab = w.dims[0], dim = w.dims[1];
      std::vector<double> rows(static_cast<size_t>(out.count()));
      for (size_t p = 0; p < which.size(); ++p) {
        const int64_t row = checked_index(which[p], vocab, "index");
        std::copy_n(table.begin() + row * dim, dim, rows.begin() + static_cast<int64_t>(p) * dim);
      }
      write(out, rows);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetEmbeddingBackwardWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t,
                                                                   const cnnlTensorDescriptor_t, bool, size_t* size) {
  return call("cnnlGetEmbeddingBackwardWorkspaceSize", [&] {
    if (!size) bad_param("size is NULL");
    *size = kEmbeddingBackwardWorkspace;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlEmbeddingBackward(cnnlHandle_t handle, int padding_idx, bool scale_grad_by_freq,
                                                   const cnnlTensorDescriptor_t indices_desc, const void* indices,
                                                   const cnnlTensorDescriptor_t grad_desc, const void* grad,
                                                   void* workspace, size_t workspace_size,
                                                   const cnnlTensorDescriptor_t output_desc, void* output) {
  return call("cnnlEmbeddingBackward", handle, [&](const auto& enqueue) {
    if (scale_grad_by_freq) not_supported("scale_grad_by_freq is not emulated");
    if (workspace_size < kEmbeddingBackwardWorkspace) bad_param("the workspace is smaller than its query says");
    check_workspace(workspace, workspace_size);
    const Operand idx = operand(indices_desc, indices, "indices"), g = operand(grad_desc, grad, "grad");
    const Operand out = operand(output_desc, output, "output");
    require_index(idx, "indices");
    if (out.rank() != 2 || g.count() != idx.count() * out.dims[1] || g.dtype != out.dtype)
      bad_param("grad must hold one row of output's width per index, in output's dtype");
    enqueue([idx, g, out, padding_idx] {
      const std::vector<double> which = read(idx), rows = read(g);
      const int64_t vocab = out.dims[0], dim = out.dims[1];
      // Rows accumulate in index order: a fixed order, so the result is deterministic.
      std::vector<float> sums(static_cast<size_t>(vocab * dim), 0.0f);
      for (size_t p = 0; p < which.size(); ++p) {
        const int64_t row = checked_index(which[p], vocab, "index");
        if (row == padding_idx) continue;
        for (int64_t j = 0; j < dim; ++j)
          sums[static_cast<size_t>(row * dim + j)] += fp32(rows[p * static_cast<size_t>(dim) + static_cast<size_t>(j)]);
      }
      write(out, std::vector<double>(sums.begin(), sums.end()));
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlIndexSelect(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                             const void* input, const cnnlTensorDescriptor_t index_desc,
                                             const void* index, const cnnlTensorDescriptor_t output_desc,
                                             void* output) {
  return call("cnnlIndexSelect", handle, [&](const auto& enqueue) {
    const Operand in = operand(input_desc, input, "input"), idx = operand(index_desc, index, "index");
    const Operand out = operand(output_desc, output, "output");
    check_dim(dim, in);
    require_index(idx, "index");
    if (idx.rank() != 1) bad_param("index must be 1-D");
    std::vector<int64_t> expected = in.dims;
    expected[static_cast<size_t>(dim)] = idx.dims[0];
    if (out.dims != expected || out.dtype != in.dtype) bad_param("output must be " + shape_text(expected));
    enqueue([in, idx, out, dim] {
      const std::vector<double> values = read(in), which = read(idx);
      const int64_t size = in.dims[static_cast<size_t>(dim)];
      const std::vector<int64_t> source = remapped(out.dims, in.dims, dim, [&](int64_t p) {
        int64_t inner = 1;
        for (size_t d = static_cast<size_t>(dim) + 1; d < out.dims.size(); ++d) inner *= out.dims[d];
        const int64_t k = (p / inner) % out.dims[static_cast<size_t>(dim)];
        return checked_index(which[static_cast<size_t>(k)], size, "index");
      });
      std::vector<double> v(source.size());
      for (size_t p = 0; p < v.size(); ++p) v[p] = values[static_cast<size_t>(source[p])];
      write(out, v);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGather_v2(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                           const void* input, const cnnlTensorDescriptor_t index_desc,
                                           const void* index, void* workspace, size_t workspace_size,
                                           const cnnlTensorDescriptor_t output_desc, void* output) {
  return call("cnnlGather_v2", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand in = operand(input_desc, input, "input"), idx = operand(index_desc, index, "index");
    const Operand out = operand(output_desc, output, "output");
    check_dim(dim, in);
    require_index(idx, "index");
    check_fits(idx, in, dim, "index");
    if (out.dims != idx.dims || out.dtype != in.dtype) bad_param("output must have the index's shape");
    enqueue([in, idx, out, dim] {
      const std::vector<double> values = read(in), which = read(idx);
      const int64_t size = in.dims[static_cast<size_t>(dim)];
      const std::vector<int64_t> source = remapped(idx.dims, in.dims, dim, [&](int64_t p) {
        return checked_index(which[static_cast<size_t>(p)], size, "index");
      });
      std::vector<double> v(source.size());
      for (size_t p = 0; p < v.size(); ++p) v[p] = values[static_cast<size_t>(source[p])];
      write(out, v);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetScatterWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t, size_t* size) {
  return call("cnnlGetScatterWorkspaceSize", [&] {
    if (!size) bad_param("size is NULL");
    *size = 0;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlScatter_v2(cnnlHandle_t handle, int dim, const cnnlTensorDescriptor_t input_desc,
                                            const void* input, const cnnlTensorDescriptor_t index_desc,
                                            const void* index, const cnnlTensorDescriptor_t src_desc, const void* src,
                                            void* workspace, size_t workspace_size,
                                            const cnnlTensorDescriptor_t output_desc, void* output,
                                            cnnlScatterMode_t mode) {
  return call("cnnlScatter_v2", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    if (mode != CNNL_SCATTER && mode != CNNL_SCATTER_ADD) bad_param("unknown scatter mode");
    const Operand in = operand(input_desc, input, "input"), idx = operand(index_desc, index, "index");
    const Operand from = operand(src_desc, src, "src"), out = operand(output_desc, output, "output");
    check_dim(dim, in);
    require_index(idx, "index");
    check_fits(idx, in, dim, "index");
    if (from.rank() != idx.rank()) bad_param("src must have the index's rank");
    for (int d = 0; d < idx.rank(); ++d)
      if (from.dims[static_cast<size_t>(d)] < idx.dims[static_cast<size_t>(d)])
        bad_param("src " + shape_text(from.dims) + " is smaller than the index " + shape_text(idx.dims));
    if (out.dims != in.dims || out.dtype != in.dtype || from.dtype != in.dtype)
      bad_param("output must be the input's shape and dtype, src of its dtype");
    const bool add = mode == CNNL_SCATTER_ADD;
    enqueue([in, idx, from, out, dim, add] {
      std::vector<double> values = read(in);
      const std::vector<double> which = read(idx);
      // src is read over the index's shape (it may be larger).
      Operand src_view = from;
      src_view.dims = idx.dims;
      const std::vector<double> adds = read(src_view);
      const int64_t size = in.dims[static_cast<size_t>(dim)];
      const std::vector<int64_t> target = remapped(idx.dims, in.dims, dim, [&](int64_t p) {
        return checked_index(which[static_cast<size_t>(p)], size, "index");
      });
      // In index order, accumulating in FP32 and rounding once to the output's dtype: deterministic.
      for (size_t p = 0; p < target.size(); ++p) {
        double& slot = values[static_cast<size_t>(target[p])];
        slot = add ? static_cast<double>(fp32(slot) + fp32(adds[p])) : adds[p];
      }
      write(out, values);
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlEmbeddingForward_v2);
H2_CHECK_SIGNATURE(cnnlGetEmbeddingBackwardWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlEmbeddingBackward);
H2_CHECK_SIGNATURE(cnnlIndexSelect);
H2_CHECK_SIGNATURE(cnnlGather_v2);
H2_CHECK_SIGNATURE(cnnlGetScatterWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlScatter_v2);
