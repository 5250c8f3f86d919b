// Emulated softmax (forward and backward, plain and log, over one axis of a 3-D tensor) and layer
// normalization (forward and backward over the trailing dimensions). Statistics accumulate in double
// and the results round once to the output's dtype.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

// The lines a softmax normalizes over a 3-D [d0, d1, d2]: `lines` lines of `length` elements, element
// j of line l at index start(l) + j * step in row-major order.
struct Lines {
  int64_t lines, length, step;
  std::vector<int64_t> starts;
};

Lines lines_of(const std::vector<int64_t>& dims, cnnlSoftmaxMode_t mode) {
  if (dims.size() != 3) bad_param("softmax takes a 3-D tensor, not " + shape_text(dims));
  const int64_t d0 = dims[0], d1 = dims[1], d2 = dims[2];
  Lines l{};
  switch (mode) {
    case CNNL_SOFTMAX_MODE_LOW_DIMENSION:
      l = {d0 * d1, d2, 1, {}};
      for (int64_t i = 0; i < d0 * d1; ++i) l.starts.push_back(i * d2);
      break;
    case CNNL_SOFTMAX_MODE_MEDIUM_DIMENSION:
      l = {d0 * d2, d1, d2, {}};
      for (int64_t a = 0; a < d0; ++a)
        for (int64_t c = 0; c < d2; ++c) l.starts.push_back(a * d1 * d2 + c);
      break;
    case CNNL_SOFTMAX_MODE_HIGH_DIMENSION:
      l = {d1 * d2, d0, d1 * d2, {}};
      for (int64_t i = 0; i < d1 * d2; ++i) l.starts.push_back(i);
      break;
    default: bad_param("unknown softmax mode");
  }
  return l;
}

void check_algorithm(cnnlSoftmaxAlgorithm_t algorithm) {
  if (algorithm != CNNL_SOFTMAX_FAST && algorithm != CNNL_SOFTMAX_ACCURATE && algorithm != CNNL_SOFTMAX_LOG)
    bad_param("unknown softmax algorithm");
}

// Layer norm's split of x's dims at `axis`: rows before, features from it on.
std::pair<int64_t, int64_t> rows_and_features(const Operand& x, int axis) {
  if (axis < 0 || axis >= x.rank()) bad_param("axis " + std::to_string(axis) + " is outside x " + shape_text(x.dims));
  int64_t rows = 1, features = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? rows : features) *= x.dims[static_cast<size_t>(d)];
  return {rows, features};
}

void check_statistics(const Operand& stats, const Operand& x, int axis, const char* role) {
  const std::vector<int64_t> expected(x.dims.begin(), x.dims.begin() + axis);
  if (stats.count() != Operand{x.dtype, expected, {}, nullptr}.count() || !is_floating(stats.dtype))
    bad_param(std::string(role) + " " + shape_text(stats.dims) + " must hold x's leading dims " + shape_text(expected) +
              " in a float type");
}

void check_affine(const Operand& w, const Operand& x, int axis, const char* role) {
  if (w.data == nullptr) return;
  const std::vector<int64_t> expected(x.dims.begin() + axis, x.dims.end());
  if (w.count() != Operand{x.dtype, expected, {}, nullptr}.count() || w.dtype != x.dtype)
    bad_param(std::string(role) + " must have x's trailing dims " + shape_text(expected) + " and dtype " +
              dtype_text(x.dtype));
}

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlSoftmaxForward_v2(cnnlHandle_t handle, cnnlSoftmaxAlgorithm_t algorithm,
                                                   cnnlSoftmaxMode_t mode, cnnlComputationPreference_t,
                                                   const void* alpha, const cnnlTensorDescriptor_t x_desc,
                                                   const void* x, const void* beta, const cnnlTensorDescriptor_t y_desc,
                                                   void* y) {
  return call("cnnlSoftmaxForward_v2", handle, [&](const auto& enqueue) {
    if (alpha || beta) bad_param("alpha and beta are not supported: pass NULL");
    check_algorithm(algorithm);
    const Operand in = operand(x_desc, x, "x"), out = operand(y_desc, y, "y");
    if (in.dims != out.dims || in.dtype != out.dtype || !is_floating(in.dtype))
      bad_param("x and y must be float tensors of one shape and dtype");
    const Lines l = lines_of(in.dims, mode);
    const bool log = algorithm == CNNL_SOFTMAX_LOG;
    enqueue([in, out, l, log] {
      std::vector<double> v = read(in);
      for (int64_t s : l.starts) {
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < l.length; ++j) top = std::max(top, v[static_cast<size_t>(s + j * l.step)]);
        double total = 0;
        for (int64_t j = 0; j < l.length; ++j) total += std::exp(v[static_cast<size_t>(s + j * l.step)] - top);
        for (int64_t j = 0; j < l.length; ++j) {
          double& e = v[static_cast<size_t>(s + j * l.step)];
          e = log ? e - top - std::log(total) : std::exp(e - top) / total;
        }
      }
      write(out, v);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSoftmaxBackward(cnnlHandle_t handle, cnnlSoftmaxAlgorithm_t algorithm,
                                                 cnnlSoftmaxMode_t mode, const void* alpha,
                                                 const cnnlTensorDescriptor_t y_desc, const void* y,
                                                 const cnnlTensorDescriptor_t diff_y_desc, const void* diff_y,
                                                 const void* beta, const cnnlTensorDescriptor_t diff_x_desc,
                                                 void* diff_x) {
  return call("cnnlSoftmaxBackward", handle, [&](const auto& enqueue) {
    if (alpha || beta) bad_param("alpha and beta are not supported: pass NULL");
    check_algorithm(algorithm);
    const Operand out = operand(y_desc, y, "y"), dy = operand(diff_y_desc, diff_y, "diff_y");
    const Operand dx = operand(diff_x_desc, diff_x, "diff_x");
    if (out.dims != dy.dims || dy.dims != dx.dims || out.dtype != dy.dtype || dy.dtype != dx.dtype)
      bad_param("y, diff_y and diff_x must share one shape and dtype");
    const Lines l = lines_of(out.dims, mode);
    const bool log = algorithm == CNNL_SOFTMAX_LOG;
    enqueue([out, dy, dx, l, log] {
      const std::vector<double> p = read(out);
      std::vector<double> g = read(dy);
      for (int64_t s : l.starts) {
        double dot = 0;
        for (int64_t j = 0; j < l.length; ++j) {
          const size_t i = static_cast<size_t>(s + j * l.step);
          dot += log ? g[i] : g[i] * p[i];
        }
        for (int64_t j = 0; j < l.length; ++j) {
          const size_t i = static_cast<size_t>(s + j * l.step);
          g[i] = log ? g[i] - std::exp(p[i]) * dot : p[i] * (g[i] - dot);
        }
      }
      write(dx, g);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetLayerNormOpWorkspaceSize(cnnlHandle_t, int, const cnnlTensorDescriptor_t,
                                                             size_t* size) {
  return call("cnnlGetLayerNormOpWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlLayerNormForward(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc,
                                                  const void* x, int axis,
                                                  const cnnlTensorDescriptor_t weight_bias_desc, const void* weight,
                                                  const void* bias, float eps, void* workspace, size_t workspace_size,
                                                  const cnnlTensorDescriptor_t y_desc, void* y,
                                                  const cnnlTensorDescriptor_t mean_rstd_desc, void* mean, void* rstd) {
  return call("cnnlLayerNormForward", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand in = operand(x_desc, x, "x"), out = operand(y_desc, y, "y");
    if (in.dims != out.dims || in.dtype != out.dtype || !is_floating(in.dtype))
      bad_param("x and y must be float tensors of one shape and dtype");
    const Operand w = weight ? operand(weight_bias_desc, weight, "weight") : Operand{};
    const Operand b = bias ? operand(weight_bias_desc, bias, "bias") : Operand{};
    check_affine(w, in, axis, "weight");
    check_affine(b, in, axis, "bias");
    const Operand m = operand(mean_rstd_desc, mean, "saved_mean"), r = operand(mean_rstd_desc, rstd, "saved_rstd");
    check_statistics(m, in, axis, "saved_mean");
    const auto [rows, features] = rows_and_features(in, axis);
    enqueue([in, out, w, b, m, r, rows, features, eps] {
      std::vector<double> v = read(in);
      const std::vector<double> gain = w.data ? read(w) : std::vector<double>(), shift = b.data ? read(b) : gain;
      std::vector<double> means(static_cast<size_t>(rows)), rstds(static_cast<size_t>(rows));
      for (int64_t row = 0; row < rows; ++row) {
        double* line = v.data() + row * features;
        double total = 0;
        for (int64_t j = 0; j < features; ++j) total += line[j];
        const double mu = total / static_cast<double>(features);
        double spread = 0;
        for (int64_t j = 0; j < features; ++j) spread += (line[j] - mu) * (line[j] - mu);
        const double inv = 1.0 / std::sqrt(spread / static_cast<double>(features) + eps);
        for (int64_t j = 0; j < features; ++j) {
          double e = (line[j] - mu) * inv;
          if (w.data) e *= gain[static_cast<size_t>(j)];
          if (b.data) e += shift[static_cast<size_t>(j)];
          line[j] = e;
        }
        means[static_cast<size_t>(row)] = mu;
        rstds[static_cast<size_t>(row)] = inv;
      }
      write(out, v);
      write(m, means);
      write(r, rstds);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlGetLayerNormBackwardWorkspaceSize(cnnlHandle_t, const cnnlTensorDescriptor_t, int,
                                                                   size_t* size) {
  return call("cnnlGetLayerNormBackwardWorkspaceSize", [&] { *checked_size(size) = 0; });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlLayerNormBackward_v2(cnnlHandle_t handle, const cnnlTensorDescriptor_t x_desc,
                                                      const void* x, int axis, const cnnlTensorDescriptor_t diff_z_desc,
                                                      const void* diff_z, const cnnlTensorDescriptor_t weight_bias_desc,
                                                      const void* weight, const cnnlTensorDescriptor_t mean_rstd_desc,
                                                      const void* mean, const void* rstd, void* workspace,
                                                      size_t workspace_size, const cnnlTensorDescriptor_t diff_x_desc,
                                                      void* diff_x, void* diff_weight, void* diff_bias) {
  return call("cnnlLayerNormBackward_v2", handle, [&](const auto& enqueue) {
    check_workspace(workspace, workspace_size);
    const Operand in = operand(x_desc, x, "x"), dz = operand(diff_z_desc, diff_z, "diff_z");
    const Operand dx = operand(diff_x_desc, diff_x, "diff_x");
    if (in.dims != dz.dims || dz.dims != dx.dims || in.dtype != dz.dtype || dz.dtype != dx.dtype)
      bad_param("x, diff_z and diff_x must share one shape and dtype");
    const Operand w = weight ? operand(weight_bias_desc, weight, "weight") : Operand{};
    const Operand dw = diff_weight ? operand(weight_bias_desc, diff_weight, "diff_weight") : Operand{};
    const Operand db = diff_bias ? operand(weight_bias_desc, diff_bias, "diff_bias") : Operand{};
    for (const Operand* o : {&w, &dw, &db}) check_affine(*o, in, axis, "weight, diff_weight and diff_bias");
    const Operand m = operand(mean_rstd_desc, mean, "saved_mean"), r = operand(mean_rstd_desc, rstd, "saved_rstd");
    check_statistics(m, in, axis, "saved_mean");
    const auto [rows, features] = rows_and_features(in, axis);
    enqueue([in, dz, dx, w, dw, db, m, r, rows, features] {
      const std::vector<double> v = read(in), g = read(dz), mu = read(m), inv = read(r);
      const std::vector<double> gain = w.data ? read(w) : std::vector<double>(static_cast<size_t>(features), 1.0);
      std::vector<double> out(v.size()), wsum(static_cast<size_t>(features), 0.0), bsum(wsum);
      for (int64_t row = 0; row < rows; ++row) {
        const size_t base = static_cast<size_t>(row * features);
        const double mean_row = mu[static_cast<size_t>(row)], rstd_row = inv[static_cast<size_t>(row)];
        double gw_mean = 0, gwx_mean = 0;
        for (int64_t j = 0; j < features; ++j) {
          const size_t i = base + static_cast<size_t>(j);
          const double xhat = (v[i] - mean_row) * rstd_row, gw = g[i] * gain[static_cast<size_t>(j)];
          gw_mean += gw;
          gwx_mean += gw * xhat;
          wsum[static_cast<size_t>(j)] += g[i] * xhat;
          bsum[static_cast<size_t>(j)] += g[i];
        }
        gw_mean /= static_cast<double>(features);
        gwx_mean /= static_cast<double>(features);
        for (int64_t j = 0; j < features; ++j) {
          const size_t i = base + static_cast<size_t>(j);
          const double xhat = (v[i] - mean_row) * rstd_row, gw = g[i] * gain[static_cast<size_t>(j)];
          out[i] = rstd_row * (gw - gw_mean - xhat * gwx_mean);
        }
      }
      write(dx, out);
      if (dw.data) write(dw, wsum);
      if (db.data) write(db, bsum);
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlSoftmaxForward_v2);
H2_CHECK_SIGNATURE(cnnlSoftmaxBackward);
H2_CHECK_SIGNATURE(cnnlGetLayerNormOpWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlLayerNormForward);
H2_CHECK_SIGNATURE(cnnlGetLayerNormBackwardWorkspaceSize);
H2_CHECK_SIGNATURE(cnnlLayerNormBackward_v2);
