// softmax, layer_norm and rms_norm, forward and backward.
#include <cmath>

#include "cases.hpp"

namespace h2::conformance {

namespace {

Case softmax_case(std::string name, DType dtype, Shape shape, double scale, bool causal,
                  Layout layout = Layout::contiguous, Fill fill = Fill::normal, double magnitude = 3) {
  Case x{.op = "softmax", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .fill = fill, .scale = magnitude, .layout = layout},
               {.name = "y", .shape = shape, .role = Role::output}};
  x.run = [scale, causal](Stream& s, const std::vector<Tensor>& t) { ops::softmax(s, t[0], t[1], scale, causal); };
  x.n = shape.empty() ? 1 : shape.back();
  return x;
}

Case softmax_backward_case(std::string name, DType dtype, Shape shape, double scale) {
  Case x{.op = "softmax_backward", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = 3},
               {.name = "y", .shape = shape, .fill = Fill::derived},
               {.name = "dy", .shape = shape},
               {.name = "dx", .shape = shape, .role = Role::output}};
  x.prepare = [scale](Stream& s, const std::vector<Tensor>& t) { ops::softmax(s, t[0], t[1], scale); };
  x.run = [scale](Stream& s, const std::vector<Tensor>& t) { ops::softmax_backward(s, t[1], t[2], t[3], scale); };
  x.n = shape.back();
  return x;
}

Shape rows(const Shape& shape) {
  return Shape(shape.begin(), shape.end() - 1);
}

Case layer_norm_case(std::string name, DType dtype, Shape shape, bool affine, Layout layout = Layout::contiguous,
                     double magnitude = 2) {
  const int64_t n = shape.back();
  Case x{.op = "layer_norm", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = magnitude, .layout = layout},
               {.name = "weight", .shape = {n}},
               {.name = "bias", .shape = {n}},
               {.name = "y", .shape = shape, .role = Role::output},
               {.name = "mean", .shape = rows(shape), .role = Role::output, .kind = Kind::statistic},
               {.name = "rstd", .shape = rows(shape), .role = Role::output, .kind = Kind::statistic}};
  x.run = [affine](Stream& s, const std::vector<Tensor>& t) {
    ops::layer_norm(s, t[0], affine ? t[1] : Tensor(), affine ? t[2] : Tensor(), t[3], t[4], t[5], 1e-5);
  };
  x.n = n;
  return x;
}

Case layer_norm_backward_case(std::string name, DType dtype, Shape shape) {
  const int64_t n = shape.back(), r = shape_numel(shape) / n;
  Case x{.op = "layer_norm_backward", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = 2},
               {.name = "weight", .shape = {n}},
               {.name = "mean", .shape = rows(shape), .kind = Kind::statistic, .fill = Fill::derived},
               {.name = "rstd", .shape = rows(shape), .kind = Kind::statistic, .fill = Fill::derived},
               {.name = "dy", .shape = shape},
               {.name = "dx", .shape = shape, .role = Role::output},
               {.name = "dweight", .shape = {n}, .role = Role::output},
               {.name = "dbias", .shape = {n}, .role = Role::output}};
  x.prepare = [shape](Stream& s, const std::vector<Tensor>& t) {
    Tensor y = Tensor::empty(t[0].device(), shape, t[0].dtype());
    ops::layer_norm(s, t[0], t[1], Tensor(), y, t[2], t[3], 1e-5);
  };
  x.run = [](Stream& s, const std::vector<Tensor>& t) {
    ops::layer_norm_backward(s, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
  };
  x.n = n;
  x.output_n["dweight"] = r;
  x.output_n["dbias"] = r;
  return x;
}

Case rms_norm_case(std::string name, DType dtype, Shape shape, Layout layout = Layout::contiguous,
                   double magnitude = 2) {
  const int64_t n = shape.back();
  Case x{.op = "rms_norm", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = magnitude, .layout = layout},
               {.name = "weight", .shape = {n}},
               {.name = "y", .shape = shape, .role = Role::output},
               {.name = "rstd", .shape = rows(shape), .role = Role::output, .kind = Kind::statistic}};
  x.run = [](Stream& s, const std::vector<Tensor>& t) { ops::rms_norm(s, t[0], t[1], t[2], t[3], 1e-6); };
  x.n = n;
  return x;
}

Case rms_norm_backward_case(std::string name, DType dtype, Shape shape) {
  const int64_t n = shape.back(), r = shape_numel(shape) / n;
  Case x{.op = "rms_norm_backward", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = 2},
               {.name = "weight", .shape = {n}},
               {.name = "rstd", .shape = rows(shape), .kind = Kind::statistic, .fill = Fill::derived},
               {.name = "dy", .shape = shape},
               {.name = "dx", .shape = shape, .role = Role::output},
               {.name = "dweight", .shape = {n}, .role = Role::output}};
  x.prepare = [shape](Stream& s, const std::vector<Tensor>& t) {
    Tensor y = Tensor::empty(t[0].device(), shape, t[0].dtype());
    ops::rms_norm(s, t[0], t[1], y, t[2], 1e-6);
  };
  x.run = [](Stream& s, const std::vector<Tensor>& t) {
    ops::rms_norm_backward(s, t[0], t[1], t[2], t[3], t[4], t[5]);
  };
  x.n = n;
  x.output_n["dweight"] = r;
  return x;
}

}  // namespace

void add_normalization_cases(CaseList& list, const Sizes& s, DType dtype) {
  const int64_t t = s.tokens(), h = s.hidden, hd = s.head_dim();
  auto& cases = list.cases;
  const double attention_scale = 1 / std::sqrt(static_cast<double>(hd));
  cases.push_back(softmax_case("causal scores " + shape_name({s.batch, s.heads, s.seq, s.seq}), dtype,
                               {s.batch, s.heads, s.seq, s.seq}, attention_scale, true));
  cases.push_back(softmax_case("vocabulary rows " + shape_name({t, s.vocab}), dtype, {t, s.vocab}, 1.0, false));
  cases.push_back(softmax_case("rows stored transposed", dtype, {24, 40}, 0.5, false, Layout::transposed));
  cases.push_back(softmax_case("unaligned start", dtype, {5, 33}, 1.0, false, Layout::offset));
  cases.push_back(softmax_case("more queries than keys (masked rows)", dtype, {6, 4}, 1.0, true));
  cases.push_back(softmax_case("size-1 rows", dtype, {7, 1}, 1.0, false));
  // Logits up to about +-150, where exp overflows fp32 unless the row's max is subtracted first.
  cases.push_back(softmax_case("large logits", dtype, {6, 96}, 1.0, false, Layout::contiguous, Fill::normal, 40));
  cases.push_back(softmax_case("no rows", dtype, {0, 9}, 1.0, false));
  list.cases.push_back(softmax_backward_case("scores " + shape_name({s.heads, s.seq, s.seq}), dtype,
                                             {s.heads, s.seq, s.seq}, attention_scale));
  list.cases.push_back(softmax_backward_case("vocabulary rows " + shape_name({8, s.vocab}), dtype, {8, s.vocab}, 1.0));

  cases.push_back(layer_norm_case("hidden " + shape_name({t, h}), dtype, {t, h}, true));
  cases.push_back(layer_norm_case("without weight and bias", dtype, {t, h}, false));
  cases.push_back(layer_norm_case("strided rows", dtype, {9, 48}, true, Layout::strided));
  cases.push_back(layer_norm_case("batched " + shape_name({s.batch, s.seq, h}), dtype, {s.batch, s.seq, h}, true));
  cases.push_back(layer_norm_backward_case("hidden " + shape_name({t, h}), dtype, {t, h}));
  {
    // Without weight (and so without dweight and dbias): the weight is 1.
    Case x{.op = "layer_norm_backward", .name = "without weight", .dtype = dtype};
    const Shape shape{6, 40};
    x.tensors = {{.name = "x", .shape = shape, .scale = 2},
                 {.name = "mean", .shape = rows(shape), .kind = Kind::statistic, .fill = Fill::derived},
                 {.name = "rstd", .shape = rows(shape), .kind = Kind::statistic, .fill = Fill::derived},
                 {.name = "dy", .shape = shape},
                 {.name = "dx", .shape = shape, .role = Role::output}};
    x.prepare = [shape](Stream& st, const std::vector<Tensor>& v) {
      Tensor y = Tensor::empty(v[0].device(), shape, v[0].dtype());
      ops::layer_norm(st, v[0], Tensor(), Tensor(), y, v[1], v[2], 1e-5);
    };
    x.run = [](Stream& st, const std::vector<Tensor>& v) {
      ops::layer_norm_backward(st, v[0], Tensor(), v[1], v[2], v[3], v[4], Tensor(), Tensor());
    };
    x.n = shape.back();
    cases.push_back(x);
  }
  cases.push_back(rms_norm_case("hidden " + shape_name({t, h}), dtype, {t, h}));
  cases.push_back(rms_norm_case("unaligned start", dtype, {7, 40}, Layout::offset));
  // Rows whose mean square (1e-6) is as small as eps: eps must go inside the square root.
  cases.push_back(rms_norm_case("small rows, eps dominates", dtype, {5, 64}, Layout::contiguous, 1e-3));
  cases.push_back(layer_norm_case("small rows, eps dominates", dtype, {5, 64}, true, Layout::contiguous, 3e-3));
  cases.push_back(rms_norm_backward_case("hidden " + shape_name({t, h}), dtype, {t, h}));
}

}  // namespace h2::conformance
