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
