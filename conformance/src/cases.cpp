#include "cases.hpp"

#include <algorithm>

#include "h2/op_registry.hpp"

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

// Each operator's case in each dtype that the sweeps vary: no empty or rank-0 tensor, the first one
// made of at most 64Ki elements per tensor, else the smallest if it has at most 1Mi per tensor
// (--full's smallest case of some operators is a whole LLaMA-7B table, 131M elements: varying that
// would cost more than the rest of the suite, and --quick covers it). Copies: the sweeps append to
// the list they come from.
std::vector<Case> sweep_representatives(const std::vector<Case>& cases) {
  struct Pick {
    const Case* c;
    int64_t largest;
  };
  std::vector<Pick> picks;  // one per (op, dtype), in the order first met
  for (const Case& c : cases) {
    int64_t largest = 0;
    bool plain = true;
    for (const TensorSpec& t : c.tensors) {
      plain &= !t.shape.empty() && shape_numel(t.shape) > 0;
      largest = std::max(largest, shape_numel(t.shape));
    }
    if (!plain) continue;
    auto same = [&](const Pick& p) { return p.c->op == c.op && p.c->dtype == c.dtype; };
    auto pick = std::find_if(picks.begin(), picks.end(), same);
    if (pick == picks.end()) {
      picks.push_back({&c, largest});
    } else if (pick->largest > (int64_t{1} << 16) && largest < pick->largest) {
      *pick = {&c, largest};
    }
  }
  std::vector<Case> representatives;
  for (const Pick& p : picks)
    if (p.largest <= (int64_t{1} << 20)) representatives.push_back(*p.c);
  return representatives;
}

// Each representative again with every tensor in one kind of view: the last two dimensions
// transposed, rows sliced from wider ones, an unaligned start with guard elements on both sides, and
// inputs broadcast along their first dimension (stride 0). A plugin whose capability claims no
// strides reports the strided ones not supported; the unaligned start is contiguous and applies to
// every plugin.
void add_layout_sweep(const std::vector<Case>& representatives, CaseList& list) {
  struct View {
    const char* name;
    Layout layout;
    bool (*applies)(const TensorSpec&);
  };
  static const View views[] = {
      {"every tensor transposed", Layout::transposed, [](const TensorSpec& t) { return t.shape.size() >= 2; }},
      {"every tensor rows sliced from wider rows", Layout::strided, [](const TensorSpec&) { return true; }},
      {"every tensor unaligned, guarded both sides", Layout::offset, [](const TensorSpec&) { return true; }},
      {"inputs broadcast along dim 0", Layout::broadcast,
       [](const TensorSpec& t) { return t.role == Role::input && t.fill != Fill::derived && t.shape[0] > 1; }},
  };
  for (const Case& representative : representatives) {
    for (const View& view : views) {
      Case variant = representative;
      bool changed = false;
      for (TensorSpec& t : variant.tensors)
        if (view.applies(t)) t.layout = view.layout, changed = true;
      if (!changed) continue;
      variant.name += ", " + std::string(view.name);
      list.cases.push_back(std::move(variant));
    }
  }
}

// The listed operators' representatives again with a NaN, +Inf or -Inf at every 211th element of
// their float inputs: IEEE arithmetic decides where they propagate, the same in fp64 and in fp32 in
// any order for these operators, and the comparison wants NaN for NaN and the same infinity.
void add_special_values_sweep(const std::vector<Case>& representatives, CaseList& list) {
  static const char* const ops[] = {"gemm",   "softmax",     "layer_norm", "rms_norm",      "swiglu",
                                    "rotary", "reduce",      "embedding",  "attention",     "attention_backward",
                                    "where",  "masked_fill", "copy",       "binary_scalar", "index_select",
                                    "gather", "scatter_add"};
  for (const Case& representative : representatives) {
    if (std::find(std::begin(ops), std::end(ops), representative.op) == std::end(ops)) continue;
    Case variant = representative;
    bool changed = false;
    for (TensorSpec& t : variant.tensors) {
      const bool plain = t.fill == Fill::normal || t.fill == Fill::uniform || t.fill == Fill::positive;
      if (t.role != Role::output && t.kind == Kind::floating && plain) t.fill = Fill::sparse_special, changed = true;
    }
    if (!changed) continue;
    variant.name += ", NaN and infinities in every input";
    list.cases.push_back(std::move(variant));
  }
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
  const std::vector<Case> representatives = sweep_representatives(list.cases);
  add_layout_sweep(representatives, list);
  add_special_values_sweep(representatives, list);
  add_behaviour_checks(list);
  // Group by operator in the suite's order, keeping each operator's cases in the order they were made.
  const std::vector<std::string> order = operator_names();
  auto rank = [&](const std::string& op) { return std::find(order.begin(), order.end(), op) - order.begin(); };
  std::stable_sort(list.cases.begin(), list.cases.end(),
                   [&](const Case& a, const Case& b) { return rank(a.op) < rank(b.op); });
  return list;
}

std::vector<std::string> operator_names() {
  // Every operator of the ABI in id order (the core's registry), then the behaviour checks.
  std::vector<std::string> names;
  for (H2_Op op : all_ops()) names.emplace_back(op_name(op));
  names.emplace_back("streams");
  names.emplace_back("errors");
  return names;
}

}  // namespace h2::conformance
