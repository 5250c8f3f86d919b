// The suite's cases, by operator family. Shapes come from real LLM configurations: GPT-2-small-like
// widths scaled down for --quick, LLaMA-7B widths (with a handful of tokens) for --full, plus the
// edge cases every family needs (empty and size-1 dimensions, strides, unaligned starts,
// broadcasting, NaN and infinities, long reductions).
#pragma once

#include <vector>

#include "case.hpp"
#include "h2/conformance.hpp"

namespace h2::conformance {

struct Sizes {
  int64_t batch, seq, hidden, heads, kv_heads, ffn, vocab;
  int64_t long_k;  // the long reduction
  int64_t tokens() const { return batch * seq; }
  int64_t head_dim() const { return hidden / heads; }
};

Sizes sizes_for(Mode mode);

void add_linear_cases(CaseList& list, const Sizes& s, DType dtype);         // gemm
void add_normalization_cases(CaseList& list, const Sizes& s, DType dtype);  // softmax, layer/rms norm
void add_activation_cases(CaseList& list, const Sizes& s, DType dtype);     // gelu, silu, swiglu
void add_model_cases(CaseList& list, const Sizes& s, DType dtype);          // embedding, rotary, loss, attention
void add_training_cases(CaseList& list, const Sizes& s, DType dtype);       // random, optimizer
void add_tensor_cases(CaseList& list, const Sizes& s, DType dtype);         // elementwise, reduce, movement
void add_behaviour_checks(CaseList& list);

// Every case for the given dtypes, in operator order.
CaseList build_cases(Mode mode, const std::vector<DType>& dtypes);

// "[4, 64]"
std::string shape_name(const Shape& shape);

}  // namespace h2::conformance
