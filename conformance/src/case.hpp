// A conformance case: one operator call with generated inputs, in one dtype, with the error model
// its outputs are judged by. Cases are plain data plus a `run` function that calls the operator
// through h2::ops on whatever device the tensors live on, so the same case runs on the plugin under
// test, on the reference in the case's dtype and on the reference in fp64 (the exact result).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "h2/h2.hpp"

namespace h2::conformance {

enum class Role { input, output, inout };

// What dtype a tensor gets in a run.
enum class Kind {
  floating,   // the case's dtype (fp64 in the exact run)
  statistic,  // f32 (fp64 in the exact run): lse, mean, rstd, losses, norms
  master,     // f32 (fp64 in the exact run): AdamW master weights and state
  index,      // i64
  index32,    // i32
  mask,       // bool
  fixed,      // TensorSpec::fixed_dtype in every run (the source of a cast)
};

// How input values are generated (seeded per case and tensor).
enum class Fill {
  normal,          // N(0, 1) * scale
  positive,        // uniform [0.5, 2) * scale
  uniform,         // uniform [-1, 1) * scale
  indices,         // integers in [0, limit)
  mask,            // 0 or 1, about half each
  special,         // normal values with NaN, +Inf, -Inf and 0 mixed in
  sparse_special,  // normal values with a NaN, +Inf or -Inf at every 211th element
  subnormal,       // values in (0, 1) * scale, spread over ten binades: scale is the dtype's smallest normal
  cast_edges,      // every other value one a float-to-integer cast must get right: NaN, +-Inf, +-2^63,
                   // +-2^31, fractions either side of zero, values beyond int64; normal * scale between
  zeros,
  derived,  // computed by the case's `prepare` from the other inputs (e.g. a forward's outputs)
};

// How a view sits in its memory, to exercise strides and alignment.
enum class Layout {
  contiguous,
  transposed,  // the last two dimensions swapped in memory
  offset,      // starts one element into its buffer (not 256-byte aligned), one spare element after it
  strided,     // rows twice as long as the view (the view is the first half of each row)
  broadcast,   // inputs only: one stored row repeated along the first dimension (stride 0)
};

struct TensorSpec {
  std::string name;
  Shape shape;
  Role role = Role::input;
  Kind kind = Kind::floating;
  Fill fill = Fill::normal;
  double scale = 1;
  int64_t limit = 0;  // indices: [0, limit)
  DType fixed_dtype = DType::f32;
  Layout layout = Layout::contiguous;
  // indices: every third value is this one instead (an ignore_index, which chance would rarely draw).
  std::optional<int64_t> every_third;
};

struct Case {
  std::string op;
  std::string name;
  DType dtype = DType::f32;
  std::vector<TensorSpec> tensors;
  // Calls the operator; `t` holds the tensors in the order of `tensors`.
  std::function<void(Stream&, const std::vector<Tensor>& t)> run;
  // Fills Fill::derived inputs from the others, on the reference in fp64 (e.g. softmax's y for its backward).
  std::function<void(Stream&, const std::vector<Tensor>& t)> prepare;
  // What the tolerance policy (tolerance.cpp) needs from the case: which variant of the operator
  // runs ("pow", "max", ...) and each output's reduction length, the terms summed into one element.
  std::string variant;
  int64_t n = 0;
  std::map<std::string, int64_t> output_n;  // where an output sums over another length

  int64_t n_for(const std::string& output) const {
    auto it = output_n.find(output);
    return it == output_n.end() ? n : it->second;
  }
};

// A behaviour check that is not a numeric comparison: runs on the plugin's device only and returns
// an empty string when it holds, else what went wrong.
struct BehaviourCheck {
  std::string op;
  std::string name;
  std::function<std::string(Stream& stream)> check;
};

struct CaseList {
  std::vector<Case> cases;
  std::vector<BehaviourCheck> behaviours;
};

}  // namespace h2::conformance
