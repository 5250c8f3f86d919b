#include <cmath>
#include <deque>
#include <string>

#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::descriptors;
using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

// Names list elements in messages: "grads[3]". A deque never moves its strings, so the names stay
// valid as long as the check that holds them.
struct ListNames {
  std::deque<std::string> names;
  const char* operator()(const char* list, size_t i) {
    names.push_back(std::string(list) + "[" + std::to_string(i) + "]");
    return names.back().c_str();
  }
};

// found_inf: one element, a statistic (f32, or f64 for full-precision checks).
void require_flag(const OpCheck& check, const Tensor& t, const char* name) {
  if (t.numel() != 1) check.fail(OpCheck::is(name, t) + " but must have one element");
  check.require_statistic(t, name);
}

// Master weights and optimizer state: f32 (or f64 where the plugin computes in it).
bool is_master_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64;
}

void require_count(const OpCheck& check, size_t count) {
  if (!(count <= 0xffffffffu)) check.fail("a tensor list holds at most 2^32 - 1 tensors");
}

}  // namespace

void adamw(Stream& stream, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
           const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
           const std::vector<Tensor>& model_params, const AdamWOptions& options, const Tensor& found_inf) {
  OpCheck check(stream, H2_OP_ADAMW);
  const size_t n = params.size();
  require_count(check, n);
  if (!(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n))
    check.fail(std::to_string(n) + " params but " + std::to_string(grads.size()) + " grads, " +
               std::to_string(exp_avgs.size()) + " exp_avgs and " + std::to_string(exp_avg_sqs.size()) +
               " exp_avg_sqs");
  if (!(model_params.empty() || model_params.size() == n))
    check.fail(std::to_string(n) + " params but " + std::to_string(model_params.size()) + " model_params");
  if (!(options.step >= 1)) check.fail("step is " + std::to_string(options.step) + " but the first step is 1");
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1))
    check.fail("beta1 and beta2 must be in [0, 1)");
  if (!(options.lr >= 0 && options.eps >= 0 && options.weight_decay >= 0))
    check.fail("lr, eps and weight_decay must not be negative");
  ListNames names;
  for (size_t i = 0; i < n; ++i) {
    const char* p = names("params", i);
    check.inout(params[i], p);
    check.input(grads[i], names("grads", i));
    check.inout(exp_avgs[i], names("exp_avgs", i));
    check.inout(exp_avg_sqs[i], names("exp_avg_sqs", i));
    if (!is_master_dtype(params[i].dtype())) check.fail(OpCheck::is(p, params[i]) + " but master weights are f32");
    for (auto [t, list] : {std::pair{&grads[i], "grads"}, std::pair{&exp_avgs[i], "exp_avgs"},
                           std::pair{&exp_avg_sqs[i], "exp_avg_sqs"}})
      check.require_same_shape(*t, names(list, i), params[i], p);
    if (exp_avgs[i].dtype() != params[i].dtype() || exp_avg_sqs[i].dtype() != params[i].dtype())
      check.fail(std::string("optimizer state for ") + p + " must have the master weights' dtype (f32)");
    if (!model_params.empty() && model_params[i].defined()) {
      const char* m = names("model_params", i);
      check.output(model_params[i], m);
      check.require_same_shape(model_params[i], m, params[i], p);
    }
  }
  check.input(found_inf, "found_inf", TensorKind::floating, true);
  if (found_inf.defined()) require_flag(check, found_inf, "found_inf");

  const std::vector<H2_Tensor> p = descriptors(params), g = descriptors(grads), m = descriptors(exp_avgs),
                               v = descriptors(exp_avg_sqs), mp = descriptors(model_params);
  auto args = make_args<H2_AdamWArgs>();
  args.count = static_cast<uint32_t>(n);
  args.params = p.data();
  args.grads = g.data();
  args.exp_avgs = m.data();
  args.exp_avg_sqs = v.data();
  args.model_params = mp.empty() ? nullptr : mp.data();
  args.found_inf = found_inf.descriptor();
  args.lr = options.lr;
  args.beta1 = options.beta1;
  args.beta2 = options.beta2;
  args.eps = options.eps;
  args.weight_decay = options.weight_decay;
  args.grad_scale = options.grad_scale;
  args.step = options.step;
  check.call(op_slot(check, check.ops().adamw), args);
}

void grad_norm(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& out, double norm_type) {
  OpCheck check(stream, H2_OP_GRAD_NORM);
  require_count(check, tensors.size());
  ListNames names;
  for (size_t i = 0; i < tensors.size(); ++i) check.input(tensors[i], names("tensors", i));
  check.output(out, "out");
  if (!(out.numel() == 1)) check.fail(OpCheck::is("out", out) + " but must have one element");
  check.require_statistic(out, "out");
  if (!(norm_type > 0)) check.fail("norm_type is " + std::to_string(norm_type) + " but must be positive (or infinity)");
  const std::vector<H2_Tensor> list = descriptors(tensors);
  auto args = make_args<H2_GradNormArgs>();
  args.count = static_cast<uint32_t>(tensors.size());
  args.tensors = list.data();
  args.out = out.descriptor();
  args.norm_type = norm_type;
  check.call(op_slot(check, check.ops().grad_norm), args);
}

void clip_by_norm(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& norm, double max_norm, double eps) {
  OpCheck check(stream, H2_OP_CLIP_BY_NORM);
  require_count(check, tensors.size());
  ListNames names;
  for (size_t i = 0; i < tensors.size(); ++i) check.inout(tensors[i], names("tensors", i));
  check.input(norm, "norm");
  if (!(norm.numel() == 1)) check.fail(OpCheck::is("norm", norm) + " but must have one element");
  check.require_statistic(norm, "norm");
  if (!(max_norm > 0)) check.fail("max_norm is " + std::to_string(max_norm) + " but must be positive");
  const std::vector<H2_Tensor> list = descriptors(tensors);
  auto args = make_args<H2_ClipByNormArgs>();
  args.count = static_cast<uint32_t>(tensors.size());
  args.tensors = list.data();
  args.norm = norm.descriptor();
  args.max_norm = max_norm;
  args.eps = eps;
  check.call(op_slot(check, check.ops().clip_by_norm), args);
}

void unscale(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& found_inf, double inv_scale) {
  OpCheck check(stream, H2_OP_UNSCALE);
  require_count(check, tensors.size());
  ListNames names;
  for (size_t i = 0; i < tensors.size(); ++i) check.inout(tensors[i], names("tensors", i));
  check.inout(found_inf, "found_inf");
  require_flag(check, found_inf, "found_inf");
  const std::vector<H2_Tensor> list = descriptors(tensors);
  auto args = make_args<H2_UnscaleArgs>();
  args.count = static_cast<uint32_t>(tensors.size());
  args.tensors = list.data();
  args.found_inf = found_inf.descriptor();
  args.inv_scale = inv_scale;
  check.call(op_slot(check, check.ops().unscale), args);
}

}  // namespace h2::ops
