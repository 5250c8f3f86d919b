// AdamW, the global gradient norm, clipping by it, and loss-scale unscaling, over tensor lists.
#include <cmath>
#include <limits>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

std::vector<TensorRef> resolve_list(const OpCall& call, uint32_t count, const H2_Tensor* list, const char* role) {
  std::vector<TensorRef> refs;
  if (list == nullptr) return refs;
  for (uint32_t i = 0; i < count; ++i) {
    try {
      refs.push_back(call.tensor(list[i], role));
    } catch (const PluginError& e) {
      throw PluginError(e.status(), std::string(e.what()) + " (" + role + "[" + std::to_string(i) + "])");
    }
  }
  return refs;
}

// The value of a one-element tensor.
double scalar(const TensorRef& t) {
  return load_element(t, 0);
}

struct AdamW {
  double lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t step;
};

void adamw_kernel(const std::vector<TensorRef>& params, const std::vector<TensorRef>& grads,
                  const std::vector<TensorRef>& exp_avgs, const std::vector<TensorRef>& exp_avg_sqs,
                  const std::vector<TensorRef>& model_params, const TensorRef& found_inf, const AdamW& h) {
  if (found_inf.present && scalar(found_inf) != 0) return;  // an overflowed loss-scaled step changes nothing
  const double correction1 = 1 - std::pow(h.beta1, static_cast<double>(h.step));
  const double correction2 = 1 - std::pow(h.beta2, static_cast<double>(h.step));
  for (size_t t = 0; t < params.size(); ++t) {
    Values p = load(params[t]), m = load(exp_avgs[t]), v = load(exp_avg_sqs[t]);
    const Values g_raw = load(grads[t]);
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = g_raw[i] * h.grad_scale;
      p[i] *= 1 - h.lr * h.weight_decay;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
      p[i] -= h.lr * (m[i] / correction1) / (std::sqrt(v[i] / correction2) + h.eps);
    }
    store(params[t], p);
    store(exp_avgs[t], m);
    store(exp_avg_sqs[t], v);
    if (t < model_params.size() && model_params[t].present) store(model_params[t], p);
  }
}

void grad_norm_kernel(const std::vector<TensorRef>& tensors, const TensorRef& out, double norm_type) {
  const bool infinity_norm = std::isinf(norm_type);
  double total = 0;  // sum of |x|^p, or max |x|; tensors and elements in order
  bool nan = false;
  for (const TensorRef& t : tensors) {
    for (double x : load(t)) {
      if (std::isnan(x)) nan = true;
      const double a = std::fabs(x);
      total = infinity_norm ? std::max(total, a) : total + (norm_type == 2 ? a * a : std::pow(a, norm_type));
    }
  }
  double norm = infinity_norm ? total : (norm_type == 2 ? std::sqrt(total) : std::pow(total, 1 / norm_type));
  if (nan) norm = std::numeric_limits<double>::quiet_NaN();
  store_element(out, 0, norm);
}

void scale_all(const std::vector<TensorRef>& tensors, double factor) {
  for (const TensorRef& t : tensors) {
    Values values = load(t);
    for (double& x : values) x *= factor;
    store(t, values);
  }
}

void unscale_kernel(const std::vector<TensorRef>& tensors, const TensorRef& found_inf, double inv_scale) {
  bool non_finite = false;
  for (const TensorRef& t : tensors) {
    Values values = load(t);
    for (double& x : values) {
      if (!std::isfinite(x)) non_finite = true;
      x *= inv_scale;
    }
    store(t, values);
  }
  if (non_finite) store_element(found_inf, 0, 1.0);
}

}  // namespace

H2_Status op_adamw(H2_Stream* stream, const H2_AdamWArgs* args) {
  return run_op("adamw", stream, args, [&](OpCall& call) {
    auto params = resolve_list(call, args->count, args->params, "params");
    auto grads = resolve_list(call, args->count, args->grads, "grads");
    auto exp_avgs = resolve_list(call, args->count, args->exp_avgs, "exp_avgs");
    auto exp_avg_sqs = resolve_list(call, args->count, args->exp_avg_sqs, "exp_avg_sqs");
    auto model_params = resolve_list(call, args->count, args->model_params, "model_params");
    TensorRef found_inf = call.tensor(args->found_inf, "found_inf");
    const AdamW h{args->lr, args->beta1, args->beta2, args->eps, args->weight_decay, args->grad_scale, args->step};
    call.enqueue([=] { adamw_kernel(params, grads, exp_avgs, exp_avg_sqs, model_params, found_inf, h); });
  });
}

H2_Status op_grad_norm(H2_Stream* stream, const H2_GradNormArgs* args) {
  return run_op("grad_norm", stream, args, [&](OpCall& call) {
    auto tensors = resolve_list(call, args->count, args->tensors, "tensors");
    TensorRef out = call.tensor(args->out, "out");
    const double norm_type = args->norm_type;
    call.enqueue([=] { grad_norm_kernel(tensors, out, norm_type); });
  });
}

H2_Status op_clip_by_norm(H2_Stream* stream, const H2_ClipByNormArgs* args) {
  return run_op("clip_by_norm", stream, args, [&](OpCall& call) {
    auto tensors = resolve_list(call, args->count, args->tensors, "tensors");
    TensorRef norm = call.tensor(args->norm, "norm");
    const double max_norm = args->max_norm, eps = args->eps;
    call.enqueue([=] {
      const double coefficient = max_norm / (scalar(norm) + eps);
      scale_all(tensors, coefficient > 1 ? 1.0 : coefficient);  // a NaN norm stays NaN, as in PyTorch
    });
  });
}

H2_Status op_unscale(H2_Stream* stream, const H2_UnscaleArgs* args) {
  return run_op("unscale", stream, args, [&](OpCall& call) {
    auto tensors = resolve_list(call, args->count, args->tensors, "tensors");
    TensorRef found_inf = call.tensor(args->found_inf, "found_inf");
    const double inv_scale = args->inv_scale;
    call.enqueue([=] { unscale_kernel(tensors, found_inf, inv_scale); });
  });
}

}  // namespace h2::cpu_reference
