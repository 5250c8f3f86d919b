// Emulated aclnn row operators: Softmax and its backward over the last dimension, LayerNorm and
// RmsNorm with their backwards over trailing dimensions. FP32 arithmetic; sums run in 64 lanes that
// are then added pairwise, as a vector unit reduces, which keeps long rows accurate.
#include <cmath>
#include <limits>
#include <optional>

#include "emulated_op.hpp"
#include "tensor_access.hpp"

using namespace ascend_emulator;

namespace {

constexpr size_t kLanes = 64;

float lane_sum(const std::vector<float>& values) {
  float lanes[kLanes] = {};
  for (size_t i = 0; i < values.size(); ++i) lanes[i % kLanes] += values[i];
  for (size_t width = kLanes / 2; width > 0; width /= 2)
    for (size_t i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

// The row length (product of the trailing `dims` dimensions) and the row count of `t`.
std::pair<int64_t, int64_t> rows_of(const aclTensor& t, size_t dims) {
  if (dims == 0 || dims > t.view.size()) throw Error(ACLNN_ERR_PARAM_INVALID, "bad normalized dimensions");
  int64_t n = 1;
  for (size_t d = t.view.size() - dims; d < t.view.size(); ++d) n *= t.view[d];
  const int64_t total = element_count(t.view);
  return {n, n == 0 ? 0 : total / n};
}

void check_last_dim(int64_t dim, const aclTensor* t) {
  if (dim != -1 && dim != static_cast<int64_t>(t->view.size()) - 1)
    throw Error(ACLNN_ERR_PARAM_INVALID, "dim " + std::to_string(dim) + ": only the last dimension is emulated");
}

void check_alike(const char* op, const aclTensor* a, const aclTensor* b) {
  check_tensor(a, "a tensor");
  check_tensor(b, "a tensor");
  if (a->view != b->view || a->dtype != b->dtype || !is_float(a->dtype))
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": tensors of one shape and float dtype expected");
}

// Statistics (mean, rstd) have the input's shape with the normalized dimensions of size 1, FLOAT.
void check_statistic(const char* op, const aclTensor* stat, const aclTensor* input, size_t dims) {
  if (stat == nullptr) return;
  check_tensor(stat, "a statistic");
  std::vector<int64_t> expected = input->view;
  for (size_t d = expected.size() - dims; d < expected.size(); ++d) expected[d] = 1;
  if (stat->view != expected || stat->dtype != ACL_FLOAT)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": mean and rstd must be FLOAT " + shape_text(expected));
}

// A weight of the normalized shape: the input's dtype or FLOAT.
void check_weight(const char* op, const aclTensor* weight, const aclTensor* input, size_t dims) {
  if (weight == nullptr) return;
  check_tensor(weight, "a weight");
  const std::vector<int64_t> expected(input->view.end() - static_cast<long>(dims), input->view.end());
  if (weight->view != expected || (weight->dtype != input->dtype && weight->dtype != ACL_FLOAT))
    throw Error(ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": a weight must be " + shape_text(expected) + " of the input's dtype or FLOAT");
}

std::optional<aclTensor> copy_of(const aclTensor* t) {
  return t ? std::optional<aclTensor>(*t) : std::nullopt;
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                                           uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnSoftmax", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnSoftmax", self, out);
    check_last_dim(dim, self);
    return [x = *self, y = *out](void*) {
      const Elements in(x), result(y);
      const auto [n, rows] = rows_of(x, 1);
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        float largest = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          row[static_cast<size_t>(j)] = static_cast<float>(in.load(r * n + j));
          largest = std::max(largest, row[static_cast<size_t>(j)]);
        }
        for (float& v : row) v = std::exp(v - largest);
        const float total = lane_sum(row);
        for (int64_t j = 0; j < n; ++j) result.store(r * n + j, row[static_cast<size_t>(j)] / total);
      }
    };
  });
}
H2_EMULATED_RUN(aclnnSoftmax)

ASCEND_EMULATOR_C aclnnStatus aclnnSoftmaxBackwardGetWorkspaceSize(const aclTensor* grad_output,
                                                                   const aclTensor* output, int64_t dim, aclTensor* out,
                                                                   uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnSoftmaxBackward", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnSoftmaxBackward", grad_output, output);
    check_alike("aclnnSoftmaxBackward", output, out);
    check_last_dim(dim, output);
    return [dy = *grad_output, y = *output, dx = *out](void*) {
      const Elements grad(dy), value(y), result(dx);
      const auto [n, rows] = rows_of(y, 1);
      std::vector<float> g(static_cast<size_t>(n)), v(static_cast<size_t>(n)), products(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          g[static_cast<size_t>(j)] = static_cast<float>(grad.load(r * n + j));
          v[static_cast<size_t>(j)] = static_cast<float>(value.load(r * n + j));
          products[static_cast<size_t>(j)] = g[static_cast<size_t>(j)] * v[static_cast<size_t>(j)];
        }
        const float dot = lane_sum(products);
        for (int64_t j = 0; j < n; ++j)
          result.store(r * n + j, v[static_cast<size_t>(j)] * (g[static_cast<size_t>(j)] - dot));
      }
    };
  });
}
H2_EMULATED_RUN(aclnnSoftmaxBackward)

ASCEND_EMULATOR_C aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input,
                                                             const aclIntArray* normalized_shape,
                                                             const aclTensor* weight_optional,
                                                             const aclTensor* bias_optional, double eps, aclTensor* out,
                                                             aclTensor* mean_out_optional, aclTensor* rstd_out_optional,
                                                             uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnLayerNorm", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnLayerNorm", input, out);
    if (normalized_shape == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "normalizedShape is NULL");
    const size_t dims = normalized_shape->values.size();
    check_weight("aclnnLayerNorm", weight_optional, input, dims);
    check_weight("aclnnLayerNorm", bias_optional, input, dims);
    check_statistic("aclnnLayerNorm", mean_out_optional, input, dims);
    check_statistic("aclnnLayerNorm", rstd_out_optional, input, dims);
    return [x = *input, y = *out, w = copy_of(weight_optional), b = copy_of(bias_optional),
            mean = copy_of(mean_out_optional), rstd = copy_of(rstd_out_optional), dims, eps](void*) {
      const Elements in(x), result(y);
      const auto [n, rows] = rows_of(x, dims);
      std::optional<Elements> weight, bias, means, rstds;
      if (w) weight.emplace(*w);
      if (b) bias.emplace(*b);
      if (mean) means.emplace(*mean);
      if (rstd) rstds.emplace(*rstd);
      std::vector<float> row(static_cast<size_t>(n)), centered(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] = static_cast<float>(in.load(r * n + j));
        const float mu = lane_sum(row) / static_cast<float>(n);
        for (int64_t j = 0; j < n; ++j) {
          const float c = row[static_cast<size_t>(j)] - mu;
          centered[static_cast<size_t>(j)] = c * c;
        }
        const float inv = 1.0f / std::sqrt(lane_sum(centered) / static_cast<float>(n) + static_cast<float>(eps));
        for (int64_t j = 0; j < n; ++j) {
          float v = (row[static_cast<size_t>(j)] - mu) * inv;
          if (weight) v *= static_cast<float>(weight->load(j));
          if (bias) v += static_cast<float>(bias->load(j));
          result.store(r * n + j, v);
        }
        if (means) means->store(r, mu);
        if (rstds) rstds->store(r, inv);
      }
    };
  });
}
H2_EMULATED_RUN(aclnnLayerNorm)

ASCEND_EMULATOR_C aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* grad_out, const aclTensor* input, const aclIntArray* normalized_shape, const aclTensor* mean,
    const aclTensor* rstd, const aclTensor* weight_optional, const aclTensor* bias_optional,
    const aclBoolArray* output_mask, aclTensor* grad_input_out, aclTensor* grad_weight_out, aclTensor* grad_bias_out,
    uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnLayerNormBackward", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnLayerNormBackward", grad_out, input);
    if (normalized_shape == nullptr || output_mask == nullptr || output_mask->values.size() != 3)
      throw Error(ACLNN_ERR_PARAM_NULLPTR, "normalizedShape or outputMask (3 values) is missing");
    const size_t dims = normalized_shape->values.size();
    check_statistic("aclnnLayerNormBackward", mean, input, dims);
    check_statistic("aclnnLayerNormBackward", rstd, input, dims);
    check_weight("aclnnLayerNormBackward", weight_optional, input, dims);
    (void)bias_optional;
    const bool want_dx = output_mask->values[0], want_dw = output_mask->values[1], want_db = output_mask->values[2];
    if (want_dx) check_alike("aclnnLayerNormBackward", grad_input_out, input);
    if (want_dw) check_weight("aclnnLayerNormBackward", grad_weight_out, input, dims);
    if (want_db) check_weight("aclnnLayerNormBackward", grad_bias_out, input, dims);
    return
        [dy = *grad_out, x = *input, mu = *mean, inv = *rstd, w = copy_of(weight_optional),
         dx = want_dx ? copy_of(grad_input_out) : std::nullopt, dw = want_dw ? copy_of(grad_weight_out) : std::nullopt,
         db = want_db ? copy_of(grad_bias_out) : std::nullopt, dims](void*) {
          const Elements grad(dy), in(x), means(mu), rstds(inv);
          const auto [n, rows] = rows_of(x, dims);
          std::optional<Elements> grad_input;
          if (dx) grad_input.emplace(*dx);
          std::vector<float> weight(static_cast<size_t>(n), 1.0f);
          if (w)
            for (int64_t j = 0; j < n; ++j) weight[static_cast<size_t>(j)] = static_cast<float>(Elements(*w).load(j));
          std::vector<std::vector<float>> dw_terms(static_cast<size_t>(n)), db_terms(static_cast<size_t>(n));
          std::vector<float> xhat(static_cast<size_t>(n)), g(static_cast<size_t>(n)), a(static_cast<size_t>(n)),
              bterm(static_cast<size_t>(n));
          for (int64_t r = 0; r < rows; ++r) {
            const auto m = static_cast<float>(means.load(r));
            const auto s = static_cast<float>(rstds.load(r));
            for (int64_t j = 0; j < n; ++j) {
              const auto k = static_cast<size_t>(j);
              const auto dyv = static_cast<float>(grad.load(r * n + j));
              xhat[k] = (static_cast<float>(in.load(r * n + j)) - m) * s;
              g[k] = dyv * weight[k];
              a[k] = g[k];
              bterm[k] = g[k] * xhat[k];
              dw_terms[k].push_back(dyv * xhat[k]);
              db_terms[k].push_back(dyv);
            }
            if (grad_input) {
              const float mean_g = lane_sum(a) / static_cast<float>(n);
              const float mean_gx = lane_sum(bterm) / static_cast<float>(n);
              const Elements& out = *grad_input;
              for (int64_t j = 0; j < n; ++j) {
                const auto k = static_cast<size_t>(j);
                out.store(r * n + j, s * (g[k] - mean_g - xhat[k] * mean_gx));
              }
            }
          }
          for (int64_t j = 0; j < n; ++j) {
            if (dw) Elements(*dw).store(j, lane_sum(dw_terms[static_cast<size_t>(j)]));
            if (db) Elements(*db).store(j, lane_sum(db_terms[static_cast<size_t>(j)]));
          }
        };
  });
}
H2_EMULATED_RUN(aclnnLayerNormBackward)

ASCEND_EMULATOR_C aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                           const aclTensor* y_out, const aclTensor* rstd_out,
                                                           uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnRmsNorm", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnRmsNorm", x, y_out);
    if (gamma == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "gamma is NULL");
    const size_t dims = gamma->view.size();
    check_weight("aclnnRmsNorm", gamma, x, dims);
    if (rstd_out == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "rstdOut is NULL");
    check_statistic("aclnnRmsNorm", rstd_out, x, dims);
    return [in_t = *x, g = *gamma, y = *y_out, rstd = *rstd_out, dims, epsilon](void*) {
      const Elements in(in_t), weight(g), result(y), rstds(rstd);
      const auto [n, rows] = rows_of(in_t, dims);
      std::vector<float> row(static_cast<size_t>(n)), squares(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          row[static_cast<size_t>(j)] = static_cast<float>(in.load(r * n + j));
          squares[static_cast<size_t>(j)] = row[static_cast<size_t>(j)] * row[static_cast<size_t>(j)];
        }
        const float inv = 1.0f / std::sqrt(lane_sum(squares) / static_cast<float>(n) + static_cast<float>(epsilon));
        for (int64_t j = 0; j < n; ++j)
          result.store(r * n + j, row[static_cast<size_t>(j)] * inv * static_cast<float>(weight.load(j)));
        rstds.store(r, inv);
      }
    };
  });
}
H2_EMULATED_RUN(aclnnRmsNorm)

ASCEND_EMULATOR_C aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x,
                                                               const aclTensor* rstd, const aclTensor* gamma,
                                                               const aclTensor* dx_out, const aclTensor* dgamma_out,
                                                               uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnRmsNormGrad", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_alike("aclnnRmsNormGrad", dy, x);
    check_alike("aclnnRmsNormGrad", x, dx_out);
    if (gamma == nullptr || dgamma_out == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "gamma or dgammaOut is NULL");
    const size_t dims = gamma->view.size();
    check_weight("aclnnRmsNormGrad", gamma, x, dims);
    check_tensor(dgamma_out, "dgammaOut");
    if (dgamma_out->view != gamma->view || dgamma_out->dtype != ACL_FLOAT)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnRmsNormGrad: dgammaOut must be FLOAT of gamma's shape");
    check_statistic("aclnnRmsNormGrad", rstd, x, dims);
    return [grad_t = *dy, in_t = *x, s_t = *rstd, g = *gamma, dx = *dx_out, dg = *dgamma_out, dims](void*) {
      const Elements grad(grad_t), in(in_t), rstds(s_t), weight(g), out(dx), dgamma(dg);
      const auto [n, rows] = rows_of(in_t, dims);
      std::vector<std::vector<float>> dg_terms(static_cast<size_t>(n));
      std::vector<float> products(static_cast<size_t>(n)), gw(static_cast<size_t>(n)), xs(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        const auto s = static_cast<float>(rstds.load(r));
        for (int64_t j = 0; j < n; ++j) {
          const auto k = static_cast<size_t>(j);
          const auto dyv = static_cast<float>(grad.load(r * n + j));
          xs[k] = static_cast<float>(in.load(r * n + j));
          gw[k] = dyv * static_cast<float>(weight.load(j));
          products[k] = gw[k] * xs[k];
          dg_terms[k].push_back(dyv * xs[k] * s);
        }
        const float mean_gx = lane_sum(products) / static_cast<float>(n);
        for (int64_t j = 0; j < n; ++j) {
          const auto k = static_cast<size_t>(j);
          out.store(r * n + j, s * (gw[k] - xs[k] * s * s * mean_gx));
        }
      }
      for (int64_t j = 0; j < n; ++j) dgamma.store(j, lane_sum(dg_terms[static_cast<size_t>(j)]));
    };
  });
}
H2_EMULATED_RUN(aclnnRmsNormGrad)
