// Emulated aclnn indexing: IndexSelect, Gather, ScatterAdd, Embedding and EmbeddingDenseBackward. An
// index outside its dimension fails the kernel (an AI core exception, reported by the stream) and
// writes nothing past the outputs. Sums accumulate in FP32 in a fixed order, so results repeat.
#include <string>

#include "elementwise.hpp"
#include "emulated_op.hpp"

using namespace ascend_emulator;

namespace {

std::vector<int64_t> coordinates_of(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coordinates(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coordinates[d] = index % shape[d];
    index /= shape[d];
  }
  return coordinates;
}

int64_t index_of(const std::vector<int64_t>& coordinates, const std::vector<int64_t>& shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coordinates[d];
  return index;
}

void check_index_tensor(const aclTensor* index, const char* role) {
  check_tensor(index, role);
  if (index->dtype != ACL_INT32 && index->dtype != ACL_INT64)
    throw Error(ACLNN_ERR_PARAM_INVALID,
                std::string(role) + " is " + dtype_name(index->dtype) + ", not INT32 or INT64");
}

int64_t checked_index(const char* op, double value, int64_t limit, int64_t position) {
  const auto index = static_cast<int64_t>(value);
  if (index < 0 || index >= limit)
    throw Error(ACL_ERROR_RT_AICORE_EXCEPTION, std::string(op) + ": index " + std::to_string(index) + " at position " +
                                                   std::to_string(position) + " is outside [0, " +
                                                   std::to_string(limit) + ")");
  return index;
}

int64_t normalized_dim(int64_t dim, size_t rank) {
  const int64_t d = dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
  if (d < 0 || d >= static_cast<int64_t>(rank))
    throw Error(ACLNN_ERR_PARAM_INVALID, "dim " + std::to_string(dim) + " is out of range");
  return d;
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                               const aclTensor* index, aclTensor* out,
                                                               uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnIndexSelect", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_float_map("aclnnIndexSelect", out, {});
    check_tensor(self, "self");
    check_index_tensor(index, "index");
    const int64_t d = normalized_dim(dim, self->view.size());
    if (index->view.size() != 1) throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnIndexSelect: index must be 1-D");
    std::vector<int64_t> expected = self->view;
    expected[static_cast<size_t>(d)] = index->view[0];
    if (expected != out->view || self->dtype != out->dtype)
      throw Error(ACLNN_ERR_PARAM_INVALID,
                  "aclnnIndexSelect: out must be " + shape_text(expected) + " of self's dtype");
    return [x = *self, i = *index, y = *out, d](void*) {
      const Elements from(x), rows(i), to(y);
      const int64_t limit = x.view[static_cast<size_t>(d)];
      std::vector<int64_t> picked(static_cast<size_t>(rows.count()));
      for (int64_t p = 0; p < rows.count(); ++p)
        picked[static_cast<size_t>(p)] = checked_index("aclnnIndexSelect", rows.load(p), limit, p);
      for (int64_t e = 0; e < to.count(); ++e) {
        std::vector<int64_t> c = coordinates_of(e, y.view);
        c[static_cast<size_t>(d)] = picked[static_cast<size_t>(c[static_cast<size_t>(d)])];
        to.store(e, from.load(index_of(c, x.view)));
      }
    };
  });
}
H2_EMULATED_RUN(aclnnIndexSelect)

ASCEND_EMULATOR_C aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor* self, const int64_t dim,
                                                          const aclTensor* index, aclTensor* out,
                                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnGather", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_float_map("aclnnGather", out, {});
    check_tensor(self, "self");
    check_index_tensor(index, "index");
    const int64_t d = normalized_dim(dim, self->view.size());
    if (index->view != out->view || index->view.size() != self->view.size() || self->dtype != out->dtype)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnGather: index and out must share a shape of self's rank");
    return [x = *self, i = *index, y = *out, d](void*) {
      const Elements from(x), where(i), to(y);
      const int64_t limit = x.view[static_cast<size_t>(d)];
      for (int64_t e = 0; e < to.count(); ++e) {
        std::vector<int64_t> c = coordinates_of(e, y.view);
        c[static_cast<size_t>(d)] = checked_index("aclnnGather", where.load(e), limit, e);
        to.store(e, from.load(index_of(c, x.view)));
      }
    };
  });
}
H2_EMULATED_RUN(aclnnGather)

ASCEND_EMULATOR_C aclnnStatus aclnnScatterAddGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                              const aclTensor* index, const aclTensor* src,
                                                              aclTensor* out, uint64_t* workspace_size,
                                                              aclOpExecutor** executor) {
  return plan_operator("aclnnScatterAdd", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_float_map("aclnnScatterAdd", out, {self});
    check_index_tensor(index, "index");
    check_tensor(src, "src");
    const int64_t d = normalized_dim(dim, out->view.size());
    if (index->view != src->view || src->dtype != out->dtype || self->view != out->view)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnScatterAdd: index and src must share a shape, self and out another");
    return [x = *self, i = *index, s = *src, y = *out, d](void*) {
      const Elements base(x), where(i), from(s), to(y);
      // The sums in FP32, each output rounded once.
      std::vector<float> totals(static_cast<size_t>(to.count()));
      for (int64_t e = 0; e < to.count(); ++e) totals[static_cast<size_t>(e)] = static_cast<float>(base.load(e));
      const int64_t limit = y.view[static_cast<size_t>(d)];
      for (int64_t e = 0; e < from.count(); ++e) {
        std::vector<int64_t> c = coordinates_of(e, s.view);
        c[static_cast<size_t>(d)] = checked_index("aclnnScatterAdd", where.load(e), limit, e);
        totals[static_cast<size_t>(index_of(c, y.view))] += static_cast<float>(from.load(e));
      }
      for (int64_t e = 0; e < to.count(); ++e) to.store(e, totals[static_cast<size_t>(e)]);
    };
  });
}
H2_EMULATED_RUN(aclnnScatterAdd)

ASCEND_EMULATOR_C aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor* weight, const aclTensor* indices,
                                                             const aclTensor* out, uint64_t* workspace_size,
                                                             aclOpExecutor** executor) {
  return plan_operator("aclnnEmbedding", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_tensor(weight, "weight");
    check_tensor(out, "out");
    check_index_tensor(indices, "indices");
    if (weight->view.size() != 2 || weight->dtype != out->dtype)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnEmbedding: weight must be 2-D of out's dtype");
    std::vector<int64_t> expected = indices->view;
    expected.push_back(weight->view[1]);
    if (expected != out->view)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnEmbedding: out must be " + shape_text(expected));
    return [w = *weight, i = *indices, y = *out](void*) {
      const Elements table(w), rows(i), to(y);
      const int64_t vocab = w.view[0], width = w.view[1];
      for (int64_t p = 0; p < rows.count(); ++p) {
        const int64_t row = checked_index("aclnnEmbedding", rows.load(p), vocab, p);
        for (int64_t j = 0; j < width; ++j) to.store(p * width + j, table.load(row * width + j));
      }
    };
  });
}
H2_EMULATED_RUN(aclnnEmbedding)

ASCEND_EMULATOR_C aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* indices, uint64_t num_weights, uint64_t padding_idx,
    bool scale_grad_by_freq, const aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnEmbeddingDenseBackward", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_tensor(grad, "grad");
    check_tensor(out, "out");
    check_index_tensor(indices, "indices");
    if (scale_grad_by_freq) throw Error(ACLNN_ERR_PARAM_INVALID, "scaleGradByFreq is not emulated");
    if (out->view.size() != 2 || out->view[0] != static_cast<int64_t>(num_weights) || grad->dtype != out->dtype ||
        element_count(grad->view) != element_count(indices->view) * out->view[1])
      throw Error(ACLNN_ERR_PARAM_INVALID,
                  "aclnnEmbeddingDenseBackward: out must be [numWeights, width] of grad's dtype");
    return [g = *grad, i = *indices, y = *out, padding_idx](void*) {
      const Elements from(g), rows(i), to(y);
      const int64_t vocab = y.view[0], width = y.view[1];
      std::vector<float> totals(static_cast<size_t>(vocab * width), 0.0f);
      for (int64_t p = 0; p < rows.count(); ++p) {
        const int64_t row = checked_index("aclnnEmbeddingDenseBackward", rows.load(p), vocab, p);
        if (static_cast<uint64_t>(row) == padding_idx) continue;
        for (int64_t j = 0; j < width; ++j)
          totals[static_cast<size_t>(row * width + j)] += static_cast<float>(from.load(p * width + j));
      }
      for (int64_t e = 0; e < to.count(); ++e) to.store(e, totals[static_cast<size_t>(e)]);
    };
  });
}
H2_EMULATED_RUN(aclnnEmbeddingDenseBackward)
