// softmax, layer_norm and rms_norm with their backwards: row-wise over the last dimension, in fp64.
#include <cmath>
#include <limits>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

namespace {

// Rows of the last dimension: a tensor of `numel` elements seen as [rows, cols].
struct Rows {
  int64_t rows, cols;
  explicit Rows(const TensorRef& t) : cols(t.rank == 0 ? 1 : t.shape[t.rank - 1]) {
    rows = cols == 0 ? 0 : t.numel() / cols;
  }
};

// Runs body(row) for every row, rows split across the pool.
template <typename Body>
void for_rows(ThreadPool& pool, int64_t rows, Body&& body) {
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) body(r);
  });
}

// An optional per-column vector (weight, bias) or `fallback` when absent.
Values load_or(const TensorRef& t, int64_t n, double fallback) {
  return t.present ? load(t) : Values(static_cast<size_t>(n), fallback);
}

void softmax_kernel(ThreadPool& pool, const TensorRef& x, const TensorRef& y, double scale, bool causal) {
  const Rows shape(x);
  const int64_t q = causal ? x.shape[x.rank - 2] : 0;
  const Values in = load(x);
  Values out(in.size(), 0.0);
  for_rows(pool, shape.rows, [&](int64_t r) {
    const double* row = &in[static_cast<size_t>(r * shape.cols)];
    double* result = &out[static_cast<size_t>(r * shape.cols)];
    // Columns [0, visible) take part; the causal mask hides the rest.
    const int64_t visible = causal ? std::clamp<int64_t>(r % q + 1 + shape.cols - q, 0, shape.cols) : shape.cols;
    if (visible == 0) return;  // a fully masked row stays 0
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j) max = std::max(max, scale * row[j]);
    if (planted_defect() == Defect::softmax_without_max) {
      float total = 0;
      for (int64_t j = 0; j < visible; ++j) total += std::exp(static_cast<float>(scale * row[j]));
      for (int64_t j = 0; j < visible; ++j) result[j] = std::exp(static_cast<float>(scale * row[j])) / total;
      return;
    }
    double sum = 0;
    const int64_t summed = planted_defect() == Defect::softmax_off_by_one ? visible - 1 : visible;
    for (int64_t j = 0; j < summed; ++j) sum += std::exp(scale * row[j] - max);
    for (int64_t j = 0; j < visible; ++j) result[j] = std::exp(scale * row[j] - max) / sum;
  });
  store(y, out);
}

void softmax_backward_kernel(ThreadPool& pool, const TensorRef& y, const TensorRef& dy, const TensorRef& dx,
                             double scale) {
  const Rows shape(y);
  const Values p = load(y), g = load(dy);
  Values out(p.size());
  for_rows(pool, shape.rows, [&](int64_t r) {
    const size_t base = static_cast<size_t>(r * shape.cols);
    double dot = 0;
    for (int64_t j = 0; j < shape.cols; ++j) dot += g[base + static_cast<size_t>(j)] * p[base + static_cast<size_t>(j)];
    for (int64_t j = 0; j < shape.cols; ++j) {
      const size_t i = base + static_cast<size_t>(j);
      out[i] = scale * p[i] * (g[i] - dot);
    }
  });
  store(dx, out);
}

void layer_norm_kernel(ThreadPool& pool, const TensorRef& x, const TensorRef& weight, const TensorRef& bias,
                       const TensorRef& y, const TensorRef& mean_out, const TensorRef& rstd_out, double eps) {
  const Rows shape(x);
  const Values in = load(x);
  const Values w = load_or(weight, shape.cols, 1.0), b = load_or(bias, shape.cols, 0.0);
  Values out(in.size()), means(static_cast<size_t>(shape.rows)), rstds(static_cast<size_t>(shape.rows));
  for_rows(pool, shape.rows, [&](int64_t r) {
    const double* row = &in[static_cast<size_t>(r * shape.cols)];
    double mean = 0;
    for (int64_t j = 0; j < shape.cols; ++j) mean += row[j];
    mean /= static_cast<double>(shape.cols);
    double var = 0;
    for (int64_t j = 0; j < shape.cols; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(shape.cols);
    const double rstd =
        planted_defect() == Defect::eps_outside_sqrt ? 1.0 / (std::sqrt(var) + eps) : 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < shape.cols; ++j)
      out[static_cast<size_t>(r * shape.cols + j)] =
          (row[j] - mean) * rstd * w[static_cast<size_t>(j)] + b[static_cast<size_t>(j)];
    means[static_cast<size_t>(r)] = mean;
    rstds[static_cast<size_t>(r)] = rstd;
  });
  store(y, out);
  store(mean_out, means);
  store(rstd_out, rstds);
  if (planted_defect() == Defect::writes_input) store(x, out);
}

void layer_norm_backward_kernel(const TensorRef& x, const TensorRef& weight, const TensorRef& mean_in,
                                const TensorRef& rstd_in, const TensorRef& dy, const TensorRef& dx,
                                const TensorRef& dweight, const TensorRef& dbias) {
  const Rows shape(x);
  const Values in = load(x), g_out = load(dy), mean = load(mean_in), rstd = load(rstd_in);
  const Values w = load_or(weight, shape.cols, 1.0);
  Values grad(in.size());
  Values dw(static_cast<size_t>(shape.cols), 0.0), db(static_cast<size_t>(shape.cols), 0.0);
  Values xhat(static_cast<size_t>(shape.cols)), g(static_cast<size_t>(shape.cols));
  // Sequential over rows: dweight and dbias sum the rows in order.
  for (int64_t r = 0; r < shape.rows; ++r) {
    const size_t base = static_cast<size_t>(r * shape.cols);
    double mean_g = 0, mean_g_xhat = 0;
    for (int64_t j = 0; j < shape.cols; ++j) {
      const size_t i = base + static_cast<size_t>(j);
      xhat[static_cast<size_t>(j)] = (in[i] - mean[static_cast<size_t>(r)]) * rstd[static_cast<size_t>(r)];
      g[static_cast<size_t>(j)] = g_out[i] * w[static_cast<size_t>(j)];
      mean_g += g[static_cast<size_t>(j)];
      mean_g_xhat += g[static_cast<size_t>(j)] * xhat[static_cast<size_t>(j)];
      dw[static_cast<size_t>(j)] += g_out[i] * xhat[static_cast<size_t>(j)];
      db[static_cast<size_t>(j)] += g_out[i];
    }
    mean_g /= static_cast<double>(shape.cols);
    mean_g_xhat /= static_cast<double>(shape.cols);
    for (int64_t j = 0; j < shape.cols; ++j)
      grad[base + static_cast<size_t>(j)] = rstd[static_cast<size_t>(r)] * (g[static_cast<size_t>(j)] - mean_g -
                                                                            xhat[static_cast<size_t>(j)] * mean_g_xhat);
  }
  store(dx, grad);
  if (dweight.present) store(dweight, dw);
  if (dbias.present) store(dbias, db);
}

void rms_norm_kernel(ThreadPool& pool, const TensorRef& x, const TensorRef& weight, const TensorRef& y,
                     const TensorRef& rstd_out, double eps) {
  const Rows shape(x);
  const Values in = load(x), w = load_or(weight, shape.cols, 1.0);
  Values out(in.size()), rstds(static_cast<size_t>(shape.rows));
  for_rows(pool, shape.rows, [&](int64_t r) {
    const double* row = &in[static_cast<size_t>(r * shape.cols)];
    double mean_square = 0;
    for (int64_t j = 0; j < shape.cols; ++j) mean_square += row[j] * row[j];
    mean_square /= static_cast<double>(shape.cols);
    const double rstd = planted_defect() == Defect::eps_outside_sqrt ? 1.0 / (std::sqrt(mean_square) + eps)
                                                                     : 1.0 / std::sqrt(mean_square + eps);
    for (int64_t j = 0; j < shape.cols; ++j)
      out[static_cast<size_t>(r * shape.cols + j)] = row[j] * rstd * w[static_cast<size_t>(j)];
    rstds[static_cast<size_t>(r)] = rstd;
  });
  store(y, out);
  store(rstd_out, rstds);
}

void rms_norm_backward_kernel(const TensorRef& x, const TensorRef& weight, const TensorRef& rstd_in,
                              const TensorRef& dy, const TensorRef& dx, const TensorRef& dweight) {
  const Rows shape(x);
  const Values in = load(x), g_out = load(dy), rstd = load(rstd_in);
  const Values w = load_or(weight, shape.cols, 1.0);
  Values grad(in.size()), dw(static_cast<size_t>(shape.cols), 0.0);
  for (int64_t r = 0; r < shape.rows; ++r) {
    const size_t base = static_cast<size_t>(r * shape.cols);
    const double s = rstd[static_cast<size_t>(r)];
    double mean_g_xhat = 0;
    for (int64_t j = 0; j < shape.cols; ++j) {
      const size_t i = base + static_cast<size_t>(j);
      const double xhat = in[i] * s;
      mean_g_xhat += g_out[i] * w[static_cast<size_t>(j)] * xhat;
      dw[static_cast<size_t>(j)] += g_out[i] * xhat;
    }
    mean_g_xhat /= static_cast<double>(shape.cols);
    for (int64_t j = 0; j < shape.cols; ++j) {
      const size_t i = base + static_cast<size_t>(j);
      grad[i] = s * (g_out[i] * w[static_cast<size_t>(j)] - in[i] * s * mean_g_xhat);
    }
  }
  store(dx, grad);
  if (dweight.present) store(dweight, dw);
}

}  // namespace

H2_Status op_softmax(H2_Stream* stream, const H2_SoftmaxArgs* args) {
  return run_op("softmax", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    const double scale = args->scale;
    const bool causal = args->causal != 0;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { softmax_kernel(pool, x, y, scale, causal); });
  });
}

H2_Status op_softmax_backward(H2_Stream* stream, const H2_SoftmaxBackwardArgs* args) {
  return run_op("softmax_backward", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y"), dy = call.tensor(args->dy, "dy"), dx = call.tensor(args->dx, "dx");
    const double scale = args->scale;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { softmax_backward_kernel(pool, y, dy, dx, scale); });
  });
}

H2_Status op_layer_norm(H2_Stream* stream, const H2_LayerNormArgs* args) {
  return run_op("layer_norm", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), w = call.tensor(args->weight, "weight");
    TensorRef b = call.tensor(args->bias, "bias"), y = call.tensor(args->y, "y");
    TensorRef mean = call.tensor(args->mean, "mean"), rstd = call.tensor(args->rstd, "rstd");
    const double eps = args->eps;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { layer_norm_kernel(pool, x, w, b, y, mean, rstd, eps); });
  });
}

H2_Status op_layer_norm_backward(H2_Stream* stream, const H2_LayerNormBackwardArgs* args) {
  return run_op("layer_norm_backward", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), w = call.tensor(args->weight, "weight");
    TensorRef mean = call.tensor(args->mean, "mean"), rstd = call.tensor(args->rstd, "rstd");
    TensorRef dy = call.tensor(args->dy, "dy"), dx = call.tensor(args->dx, "dx");
    TensorRef dw = call.tensor(args->dweight, "dweight"), db = call.tensor(args->dbias, "dbias");
    call.enqueue([=] { layer_norm_backward_kernel(x, w, mean, rstd, dy, dx, dw, db); });
  });
}

H2_Status op_rms_norm(H2_Stream* stream, const H2_RmsNormArgs* args) {
  return run_op("rms_norm", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), w = call.tensor(args->weight, "weight");
    TensorRef y = call.tensor(args->y, "y"), rstd = call.tensor(args->rstd, "rstd");
    const double eps = args->eps;
    ThreadPool& pool = call.pool();
    if (planted_defect() == Defect::ignores_stream) {
      rms_norm_kernel(pool, x, w, y, rstd, eps);  // on the caller's thread, before queued work has run
      return;
    }
    call.enqueue([=, &pool] { rms_norm_kernel(pool, x, w, y, rstd, eps); });
  });
}

H2_Status op_rms_norm_backward(H2_Stream* stream, const H2_RmsNormBackwardArgs* args) {
  return run_op("rms_norm_backward", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), w = call.tensor(args->weight, "weight");
    TensorRef rstd = call.tensor(args->rstd, "rstd"), dy = call.tensor(args->dy, "dy");
    TensorRef dx = call.tensor(args->dx, "dx"), dw = call.tensor(args->dweight, "dweight");
    call.enqueue([=] { rms_norm_backward_kernel(x, w, rstd, dy, dx, dw); });
  });
}

}  // namespace h2::cpu_reference
