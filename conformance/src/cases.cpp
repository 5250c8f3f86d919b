#include "cases.hpp"

#include <algorithm>

namespace h2::conformance {

Sizes sizes_for(Mode mode) {
  if (mode == Mode::full)  // LLaMA-7B widths, grouped-query heads, a short sequence
    return {.batch = 1,
            .seq = 64,
            .hidden = 4096,
            .heads = 32,
            .kv_heads = 8,
            .ffn = 11008,
            .vocab = 32000,
            .long_k = 16384};
  // GPT-2-small proportions scaled down so the whole suite runs in about a minute on two cores.
  return {.batch = 2, .seq = 16, .hidden = 128, .heads = 4, .kv_heads = 2, .ffn = 344, .vocab = 512, .long_k = 16384};
}

std::string shape_name(const Shape& shape) {
  return shape_string(shape);
}

namespace {

// The case of `op` in `dtype` whose tensors the sweeps re-lay: no empty or rank-0 tensor, the first
// one made of at most 64Ki elements per tensor, else the smallest if it has at most 1Mi per tensor.
const Case* sweep_representative(const std::vector<Case>& cases, const std::string& op, DType dtype) {
  const Case* best = nullptr;
  int64_t best_size = 0;
  for (const Case& c : cases) {
    if (c.op != op || c.dtype != dtype) continue;
    int64_t largest = 0;
    bool plain = true;
    for (const TensorSpec& t : c.tensors) {
      plain &= !t.shape.empty() && shape_numel(t.shape) > 0;
      largest = std::max(largest, shape_numel(t.shape));
    }
    if (!plain) continue;
    if (largest <= (int64_t{1} << 16)) return &c;
    if (best == nullptr || largest < best_size) best = &c, best_size = largest;
  }
  // --full's smallest case of some operators is a whole LLaMA-7B table (131M elements): re-laying
  // that in every view would cost more than the rest of the suite, and --quick covers the views.
  return best_size <= (int64_t{1} << 20) ? best : nullptr;
}

// Each operator's representative case again with every tensor in one kind of view: the last two
// dimensions transposed, rows sliced from wider ones, an unaligned start with guard elements on both
// sides, and inputs broadcast along their first dimension (stride 0). A plugin whose capability
// claims no strides reports the strided ones not supported; the unaligned start is contiguous and
// applies to every plugin.
void add_layout_sweep(CaseList& list) {
  struct View {
    const char* name;
    Layout layout;
    bool (*applies)(const TensorSpec&);
  };
  static const View views[] = {
      {"transposed", Layout::transposed, [](const TensorSpec& t) { return t.shape.size() >= 2; }},
      {"rows sliced from wider rows", Layout::strided, [](const TensorSpec&) { return true; }},
      {"unaligned, guarded both sides", Layout::offset, [](const TensorSpec&) { return true; }},
      {"inputs broadcast along dim 0", Layout::broadcast,
       [](const TensorSpec& t) { return t.role == Role::input && t.fill != Fill::derived && t.shape[0] > 1; }},
  };
  std::vector<std::pair<std::string, DType>> seen;
  std::vector<Case> added;
  for (const Case& c : list.cases) {
    const std::pair<std::string, DType> key{c.op, c.dtype};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const Case* representative = sweep_representative(list.cases, c.op, c.dtype);
    if (representative == nullptr) continue;
    for (const View& view : views) {
      Case variant = *representative;
      bool changed = false;
      for (TensorSpec& t : variant.tensors)
        if (view.applies(t)) t.layout = view.layout, changed = true;
      if (!changed) continue;
      variant.name += ", every tensor " + std::string(view.name);
      if (view.layout == Layout::broadcast) variant.name = representative->name + ", " + view.name;
      added.push_back(std::move(variant));
    }
  }
  for (Case& c : added) list.cases.push_back(std::move(c));
}

// Each listed operator's representative case again with a NaN, +Inf or -Inf at every 211th element
// of its float inputs: IEEE arithmetic decides where they propagate, the same in fp64 and in fp32 in
// any order for these operators, and the comparison wants NaN for NaN and the same infinity.
void add_special_values_sweep(CaseList& list) {
  static const char* const ops[] = {"gemm",   "softmax",     "layer_norm", "rms_norm",      "swiglu",
                                    "rotary", "reduce",      "embedding",  "attention",     "attention_backward",
                                    "where",  "masked_fill", "copy",       "binary_scalar", "index_select",
                                    "gather", "scatter_add"};
  std::vector<Case> added;
  std::vector<std::pair<std::string, DType>> seen;
  for (const Case& c : list.cases) {
    const std::pair<std::string, DType> key{c.op, c.dtype};
    if (std::find(std::begin(ops), std::end(ops), c.op) == std::end(ops) ||
        std::find(seen.begin(), seen.end(), key) != seen.end())
      continue;
    seen.push_back(key);
    const Case* representative = sweep_representative(list.cases, c.op, c.dtype);
    if (representative == nullptr) continue;
    Case variant = *representative;
    bool changed = false;
    for (TensorSpec& t : variant.tensors) {
      const bool plain = t.fill == Fill::normal || t.fill == Fill::uniform || t.fill == Fill::positive;
      if (t.role != Role::output && t.kind == Kind::floating && plain) t.fill = Fill::sparse_special, changed = true;
    }
    if (!changed) continue;
    variant.name += ", NaN and infinities in every input";
    added.push_back(std::move(variant));
  }
  for (Case& c : added) list.cases.push_back(std::move(c));
}

}  // namespace

CaseList build_cases(Mode mode, const std::vector<DType>& dtypes) {
  const Sizes s = sizes_for(mode);
  CaseList list;
  for (DType dtype : dtypes) {
    add_linear_cases(list, s, dtype);
    add_normalization_cases(list, s, dtype);
    add_activation_cases(list, s, dtype);
    add_model_cases(list, s, dtype);
    add_training_cases(list, s, dtype);
    add_tensor_cases(list, s, dtype);
  }
  add_layout_sweep(list);
  add_special_values_sweep(list);
  add_behaviour_checks(list);
  // Group by operator in the suite's order, keeping each operator's cases in the order they were made.
  const std::vector<std::string> order = operator_names();
  auto rank = [&](const std::string& op) { return std::find(order.begin(), order.end(), op) - order.begin(); };
  std::stable_sort(list.cases.begin(), list.cases.end(),
                   [&](const Case& a, const Case& b) { return rank(a.op) < rank(b.op); });
  return list;
}

std::vector<std::string> operator_names() {
  return {"gemm",
          "softmax",
          "softmax_backward",
          "layer_norm",
          "layer_norm_backward",
          "rms_norm",
          "rms_norm_backward",
          "gelu",
          "gelu_backward",
          "silu",
          "silu_backward",
          "swiglu",
          "swiglu_backward",
          "embedding",
          "embedding_backward",
          "rotary",
          "cross_entropy",
          "cross_entropy_backward",
          "attention",
          "attention_backward",
          "dropout",
          "uniform",
          "normal",
          "adamw",
          "grad_norm",
          "clip_by_norm",
          "unscale",
          "binary",
          "binary_scalar",
          "unary",
          "reduce",
          "copy",
          "fill",
          "arange",
          "where",
          "masked_fill",
          "index_select",
          "gather",
          "scatter_add",
          "streams",
          "errors"};
}

}  // namespace h2::conformance
