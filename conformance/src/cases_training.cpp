// Random numbers (bit-exact streams), AdamW, the gradient norm, clipping and loss-scale unscaling.
#include <limits>

#include "cases.hpp"

namespace h2::conformance {

namespace {

Case dropout_case(std::string name, DType dtype, Shape shape, double p, ops::Philox rng) {
  Case x{.op = "dropout", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape},
               {.name = "y", .shape = shape, .role = Role::output},
               {.name = "mask", .shape = shape, .role = Role::output, .kind = Kind::mask}};
  x.run = [p, rng](Stream& s, const std::vector<Tensor>& t) { ops::dropout(s, t[0], t[1], p, rng, t[2]); };
  return x;
}

Case uniform_case(std::string name, DType dtype, Shape shape, double low, double high, ops::Philox rng) {
  Case x{.op = "uniform", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "y", .shape = shape, .role = Role::output}};
  x.run = [low, high, rng](Stream& s, const std::vector<Tensor>& t) { ops::uniform(s, t[0], low, high, rng); };
  return x;
}

Case normal_case(std::string name, DType dtype, Shape shape, double mean, double std, ops::Philox rng) {
  Case x{.op = "normal", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "y", .shape = shape, .role = Role::output}};
  x.run = [mean, std, rng](Stream& s, const std::vector<Tensor>& t) { ops::normal(s, t[0], mean, std, rng); };
  // Box-Muller through the device's log, sqrt, sin and cos in fp32.
  return x;
}

// One AdamW step over a model's parameter list: master weights and state in f32, gradients and
// (optionally) model copies in the case's dtype.
Case adamw_case(std::string name, DType dtype, const std::vector<Shape>& shapes, ops::AdamWOptions options,
                bool model_copies, bool overflowed) {
  Case x{.op = "adamw", .name = std::move(name), .dtype = dtype};
  const size_t n = shapes.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string k = std::to_string(i);
    x.tensors.push_back({.name = "param" + k, .shape = shapes[i], .role = Role::inout, .kind = Kind::master});
    x.tensors.push_back({.name = "grad" + k, .shape = shapes[i], .scale = 0.1});
    x.tensors.push_back(
        {.name = "exp_avg" + k, .shape = shapes[i], .role = Role::inout, .kind = Kind::master, .scale = 0.01});
    x.tensors.push_back({.name = "exp_avg_sq" + k,
                         .shape = shapes[i],
                         .role = Role::inout,
                         .kind = Kind::master,
                         .fill = Fill::positive,
                         .scale = 1e-4});
    if (model_copies) x.tensors.push_back({.name = "model" + k, .shape = shapes[i], .role = Role::output});
  }
  // The case itself sets found_inf on the device when it simulates an overflow, so then it is written.
  x.tensors.push_back({.name = "found_inf",
                       .shape = {1},
                       .role = overflowed ? Role::inout : Role::input,
                       .kind = Kind::statistic,
                       .fill = Fill::zeros});
  const size_t per = model_copies ? 5 : 4;
  x.run = [=](Stream& s, const std::vector<Tensor>& t) {
    std::vector<Tensor> params, grads, m, v, models;
    for (size_t i = 0; i < n; ++i) {
      params.push_back(t[i * per]);
      grads.push_back(t[i * per + 1]);
      m.push_back(t[i * per + 2]);
      v.push_back(t[i * per + 3]);
      if (model_copies) models.push_back(t[i * per + 4]);
    }
    const Tensor& found = t.back();
    if (overflowed) ops::fill(s, found, 1.0);
    ops::adamw(s, params, grads, m, v, models, options, found);
  };
  return x;
}

// A parameter list shaped like a block's (norm weights, projection matrices), with the matrices cut
// to a sixteenth of their rows: the optimizer is elementwise, so full-size matrices would only cost
// time, not find more.
std::vector<Shape> layer_shapes(const Sizes& s) {
  return {{s.hidden}, {3 * s.hidden / 16, s.hidden}, {s.ffn / 16, s.hidden}, {s.hidden}};
}

int64_t total(const std::vector<Shape>& shapes) {
  int64_t n = 0;
  for (const Shape& shape : shapes) n += shape_numel(shape);
  return n;
}

}  // namespace

void add_training_cases(CaseList& list, const Sizes& s, DType dtype) {
  auto& cases = list.cases;
  const Shape act{s.tokens(), s.hidden};
  cases.push_back(dropout_case("p 0.1 " + shape_name(act), dtype, act, 0.1, {.seed = 1234, .offset = 0}));
  cases.push_back(dropout_case("p 0.5, 64-bit seed and offset", dtype, {1023}, 0.5,
                               {.seed = 0xfedcba9876543210ull, .offset = 0x100000003ull}));
  cases.push_back(dropout_case("p 0 keeps everything", dtype, {37}, 0.0, {.seed = 5}));
  {
    // p exactly the first element's draw: that element sits on the threshold, which it must pass
    // (kept when draw >= p). The device's own uniform stream gives p, so a device whose uniform
    // is right and whose comparison is one off drops it.
    Case at{.op = "dropout", .name = "p equal to the first draw", .dtype = dtype};
    at.tensors = {{.name = "x", .shape = {64}},
                  {.name = "y", .shape = {64}, .role = Role::output},
                  {.name = "mask", .shape = {64}, .role = Role::output, .kind = Kind::mask}};
    at.run = [](Stream& st, const std::vector<Tensor>& t) {
      const ops::Philox rng{.seed = 77, .offset = 8};
      Tensor draw = Tensor::empty(st.device(), {1}, DType::f32);
      ops::uniform(st, draw, 0, 1, rng);
      ops::dropout(st, t[0], t[1], draw.to_host(st)[0], rng, t[2]);
    };
    cases.push_back(at);
  }
  cases.push_back(uniform_case("[-0.1, 0.1) " + shape_name(act), dtype, act, -0.1, 0.1, {.seed = 99, .offset = 7}));
  cases.push_back(uniform_case("[0, 1) odd length", dtype, {1001}, 0.0, 1.0, {.seed = 3, .offset = 12345}));
  cases.push_back(normal_case("std 0.02 " + shape_name(act), dtype, act, 0.0, 0.02, {.seed = 11}));
  cases.push_back(normal_case("mean 1 std 3 odd length", dtype, {999}, 1.0, 3.0, {.seed = 12, .offset = 1}));

  const std::vector<Shape> layer = layer_shapes(s);
  cases.push_back(adamw_case("one block's parameters, step 1", dtype, layer,
                             {.lr = 1e-3, .weight_decay = 0.1, .step = 1}, false, false));
  cases.push_back(adamw_case(
      "with model copies, step 1000, grad scale 0.25", dtype, layer,
      {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.01, .grad_scale = 0.25, .step = 1000},
      dtype != DType::f32, false));
  cases.push_back(adamw_case("found_inf skips the step", dtype, {{5}}, {.lr = 0.1}, false, true));

  {
    Case x{.op = "grad_norm", .name = "L2 over one block's gradients", .dtype = dtype};
    for (size_t i = 0; i < layer.size(); ++i) x.tensors.push_back({.name = "g" + std::to_string(i), .shape = layer[i]});
    x.tensors.push_back({.name = "norm", .shape = {1}, .role = Role::output, .kind = Kind::statistic});
    x.run = [n = layer.size()](Stream& st, const std::vector<Tensor>& t) {
      ops::grad_norm(st, std::vector<Tensor>(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n)), t[n]);
    };
    x.n = total(layer);
    cases.push_back(x);
    Case inf = x;
    inf.name = "infinity norm";
    inf.run = [n = layer.size()](Stream& st, const std::vector<Tensor>& t) {
      ops::grad_norm(st, std::vector<Tensor>(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n)), t[n],
                     std::numeric_limits<double>::infinity());
    };
    inf.variant = "inf";
    cases.push_back(inf);
    Case p3 = x;
    p3.name = "p = 3 norm";
    p3.run = [n = layer.size()](Stream& st, const std::vector<Tensor>& t) {
      ops::grad_norm(st, std::vector<Tensor>(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n)), t[n], 3.0);
    };
    cases.push_back(p3);
  }
  {
    Case x{.op = "clip_by_norm", .name = "max norm 1 over two tensors", .dtype = dtype};
    x.tensors = {{.name = "g0", .shape = {64}, .role = Role::inout},
                 {.name = "g1", .shape = {8, 16}, .role = Role::inout},
                 {.name = "norm", .shape = {1}, .kind = Kind::statistic, .fill = Fill::positive, .scale = 10}};
    x.run = [](Stream& st, const std::vector<Tensor>& t) { ops::clip_by_norm(st, {t[0], t[1]}, t[2], 1.0); };
    cases.push_back(x);
  }
  {
    Case x{.op = "unscale", .name = "finite gradients, inverse scale 2^-10", .dtype = dtype};
    x.tensors = {
        {.name = "g0", .shape = act, .role = Role::inout, .scale = 1024},
        {.name = "found_inf", .shape = {1}, .role = Role::inout, .kind = Kind::statistic, .fill = Fill::zeros}};
    x.run = [](Stream& st, const std::vector<Tensor>& t) { ops::unscale(st, {t[0]}, t[1], 1.0 / 1024); };
    cases.push_back(x);
    Case bad = x;
    bad.name = "an infinity sets found_inf";
    bad.tensors[0] = {.name = "g0", .shape = {64}, .role = Role::inout, .fill = Fill::special};
    cases.push_back(bad);
  }
}

}  // namespace h2::conformance
