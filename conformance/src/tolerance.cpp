#include "tolerance.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace h2::conformance {

namespace {

constexpr double kFp32Accumulation = 0x1p-24;
// The final rounding may be off by this many ulps of the output (faithful rounding; see tolerance.hpp).
constexpr double kRoundingUlps = 1;
// The rounding-bias check: over at least kBiasMinimumSample distinct exact values whose bound is at
// least kRoundingDominates times everything but the final rounding, the mean signed error away from
// zero, in half-ulps, must stay within kBiasLimit.
constexpr double kRoundingDominates = 4, kBiasLimit = 0.5;
constexpr size_t kBiasMinimumSample = 64, kBiasSampleLimit = size_t{1} << 16;

std::string describe_mismatch(size_t i, double got, double want, double bound) {
  char text[160];
  std::snprintf(text, sizeof text, "element %zu: %.9g vs exact %.9g (bound %.3g)", i, got, want, bound);
  return text;
}

// m_i for each element of an output of `shape`.
HostValues magnitudes(const ErrorModel& model, const Shape& shape, const HostValues& exact, const HostValues& abs_run) {
  HostValues m(exact.size(), 0.0);
  auto finite_abs = [](double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; };
  switch (model.magnitude) {
    case Magnitude::exact:
      for (size_t i = 0; i < m.size(); ++i) m[i] = finite_abs(exact[i]);
      break;
    case Magnitude::abs_inputs:
      for (size_t i = 0; i < m.size(); ++i) m[i] = finite_abs(abs_run.at(i));
      break;
    case Magnitude::tensor: {
      double largest = 0;
      for (double v : exact) largest = std::max(largest, finite_abs(v));
      std::fill(m.begin(), m.end(), largest);
      break;
    }
    case Magnitude::row: {
      const size_t row = shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(shape.back(), 1));
      for (size_t start = 0; start < m.size(); start += row) {
        double largest = 0;
        for (size_t i = start; i < start + row && i < m.size(); ++i) largest = std::max(largest, finite_abs(exact[i]));
        for (size_t i = start; i < start + row && i < m.size(); ++i) m[i] = largest;
      }
      break;
    }
  }
  return m;
}

// Per operator (and variant, and output; "*" matches any), the first matching row wins. The
// constants are the policy: changing one changes the suite version.
struct OperatorModel {
  const char* op;
  const char* variant;
  const char* output;
  Magnitude magnitude;
  double c;
  bool bit_exact;
};

constexpr bool kBitExact = true;
const OperatorModel kOperatorModels[] = {
    // Sums of products: their error follows the sum of |terms|.
    {"gemm", "*", "*", Magnitude::abs_inputs, 2, false},
    {"embedding_backward", "*", "*", Magnitude::abs_inputs, 2, false},
    {"scatter_add", "*", "*", Magnitude::abs_inputs, 2, false},
    {"reduce", "sum", "*", Magnitude::abs_inputs, 2, false},
    {"reduce", "mean", "*", Magnitude::abs_inputs, 2, false},
    {"layer_norm", "*", "mean", Magnitude::abs_inputs, 2, false},
    {"layer_norm_backward", "*", "dbias", Magnitude::abs_inputs, 2, false},
    // Row-wise: exp, divisions, rsqrt and a reduction over the row.
    {"softmax", "*", "*", Magnitude::row, 8, false},
    {"layer_norm", "*", "rstd", Magnitude::exact, 8, false},
    {"layer_norm", "*", "*", Magnitude::row, 16, false},
    {"rms_norm", "*", "*", Magnitude::row, 8, false},
    {"rotary", "*", "*", Magnitude::row, 8, false},  // n: the position, which scales the angle's error
    // Results that cancel: bounded by the largest value of the output.
    {"softmax_backward", "*", "*", Magnitude::tensor, 16, false},
    {"layer_norm_backward", "*", "*", Magnitude::tensor, 16, false},
    {"rms_norm_backward", "*", "*", Magnitude::tensor, 16, false},
    {"gelu_backward", "*", "*", Magnitude::tensor, 16, false},
    {"silu_backward", "*", "*", Magnitude::tensor, 16, false},
    {"swiglu_backward", "*", "*", Magnitude::tensor, 16, false},
    {"cross_entropy", "*", "*", Magnitude::tensor, 16, false},
    {"cross_entropy_backward", "*", "*", Magnitude::tensor, 16, false},
    {"attention", "*", "*", Magnitude::tensor, 16, false},
    {"attention_backward", "*", "*", Magnitude::tensor, 32, false},
    {"normal", "*", "*", Magnitude::tensor, 64, false},  // log, sqrt, sin and cos in fp32
    // Elementwise math.
    {"gelu", "*", "*", Magnitude::exact, 8, false},
    {"silu", "*", "*", Magnitude::exact, 8, false},
    {"swiglu", "*", "*", Magnitude::exact, 8, false},
    {"dropout", "*", "mask", Magnitude::exact, 0, kBitExact},  // every device draws the same mask
    {"dropout", "*", "*", Magnitude::exact, 2, false},
    // The first moment b1 m + (1 - b1) g, and the parameter p (1 - lr wd) - lr u, lose digits where
    // their two terms nearly cancel; an FP32 optimizer (PyTorch's own on a GPU) keeps its error within
    // ulps of the terms, not of what is left: of the sum of |terms| for the moment, and of the largest
    // parameter for the parameters (the update's terms are signed even for |inputs|).
    {"adamw", "*", "exp_avg[0-9]*", Magnitude::abs_inputs, 32, false},
    {"adamw", "*", "param[0-9]*", Magnitude::tensor, 32, false},
    {"adamw", "*", "*", Magnitude::exact, 32, false},
    {"grad_norm", "inf", "*", Magnitude::exact, 0, kBitExact},  // a maximum picks a value
    {"grad_norm", "*", "*", Magnitude::exact, 4, false},
    {"clip_by_norm", "*", "*", Magnitude::exact, 4, false},
    {"binary", "pow", "*", Magnitude::exact, 8, false},
    {"binary", "maximum", "*", Magnitude::exact, 0, kBitExact},
    {"binary", "minimum", "*", Magnitude::exact, 0, kBitExact},
    {"binary", "*", "*", Magnitude::exact, 1, false},
    {"binary_scalar", "pow", "*", Magnitude::exact, 8, false},
    {"binary_scalar", "*", "*", Magnitude::exact, 1, false},
    {"unary", "exp", "*", Magnitude::exact, 4, false},
    {"unary", "log", "*", Magnitude::exact, 4, false},
    {"unary", "sqrt", "*", Magnitude::exact, 1, false},
    {"unary", "rsqrt", "*", Magnitude::exact, 4, false},
    {"unary", "reciprocal", "*", Magnitude::exact, 2, false},
    {"unary", "neg", "*", Magnitude::exact, 0, kBitExact},
    // Fully determined results: moving, selecting, casting (round to nearest even), the uniform
    // Philox stream (one fmaf), scaling by a power of two.
    {"reduce", "max", "*", Magnitude::exact, 0, kBitExact},
    {"reduce", "amax", "*", Magnitude::exact, 0, kBitExact},
    {"embedding", "*", "*", Magnitude::exact, 0, kBitExact},
    {"uniform", "*", "*", Magnitude::exact, 0, kBitExact},
    {"unscale", "*", "*", Magnitude::exact, 0, kBitExact},
    {"copy", "*", "*", Magnitude::exact, 0, kBitExact},
    {"fill", "*", "*", Magnitude::exact, 0, kBitExact},
    {"arange", "*", "*", Magnitude::exact, 0, kBitExact},
    {"where", "*", "*", Magnitude::exact, 0, kBitExact},
    {"masked_fill", "*", "*", Magnitude::exact, 0, kBitExact},
    {"index_select", "*", "*", Magnitude::exact, 0, kBitExact},
    {"gather", "*", "*", Magnitude::exact, 0, kBitExact},
};

bool matches(const char* pattern, const std::string& text) {
  return fnmatch(pattern, text.c_str(), 0) == 0;
}

}  // namespace

ErrorModel error_model(const Case& c, const std::string& output) {
  for (const OperatorModel& m : kOperatorModels)
    if (matches(m.op, c.op) && matches(m.variant, c.variant) && matches(m.output, output))
      return {m.magnitude, m.c, c.n_for(output), m.bit_exact};
  throw std::logic_error("no error model for " + c.op + " " + c.variant + " output " + output);
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

double smallest_normal(DType dtype) {
  switch (dtype) {
    case DType::f16: return 0x1p-14;
    case DType::f32:
    case DType::bf16: return 0x1p-126;
    case DType::f64: return 0x1p-1022;
    default: return 0;
  }
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f64: return 0x1p-53;
    case DType::f32: return 0x1p-24;
    case DType::f16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
    default: return 0;
  }
}

Comparison compare_output(const std::string& name, DType dtype, const Shape& shape, const ErrorModel& model,
                          const HostValues& plugin, const HostValues& exact, const HostValues& reference_same_dtype,
                          const HostValues& magnitude) {
  Comparison result;
  OutputError& e = result.error;
  e.name = name;
  const size_t count = plugin.size();
  if (count == 0) return result;

  const bool bit_exact = model.bit_exact || unit_roundoff(dtype) == 0;
  const HostValues& target = bit_exact ? reference_same_dtype : exact;
  const HostValues m = bit_exact ? HostValues() : magnitudes(model, shape, exact, magnitude);
  const double u_out = unit_roundoff(dtype), floor_out = smallest_normal(dtype);

  size_t mismatches = 0;
  bool biased = false;  // every element within its bound, but rounded one way on average
  double dot = 0, norm_plugin = 0, norm_exact = 0;
  // Signed error away from zero per distinct exact value, where the final rounding dominates the bound.
  std::unordered_map<double, double> rounding_errors;
  for (size_t i = 0; i < count; ++i) {
    const double got = plugin[i], want = target[i];
    double bound = 0;
    bool ok;
    if (bit_exact) {
      ok = same_value(got, want);
    } else if (!std::isfinite(want) || !std::isfinite(got)) {
      // Non-finite: NaN for NaN, the same infinity; or an overflow the reference rounds the same way.
      ok = same_value(got, want) || same_value(got, reference_same_dtype[i]);
    } else {
      const double rounding = kRoundingUlps * 2 * u_out * std::fabs(want);
      const double rest = (1 + 2 * u_out) * (model.c + static_cast<double>(model.n)) * kFp32Accumulation * m[i];
      bound = rounding + rest + floor_out;
      const double error = std::fabs(got - want);
      if (want != 0 && rounding >= kRoundingDominates * (rest + floor_out) && rounding_errors.size() < kBiasSampleLimit)
        rounding_errors.emplace(want, std::copysign(1.0, want) * (got - want) / (u_out * std::fabs(want)));
      ok = error <= bound;
      e.max_abs_error = std::max(e.max_abs_error, error);
      if (want != 0) e.max_rel_error = std::max(e.max_rel_error, error / std::fabs(want));
      e.worst_ratio = std::max(e.worst_ratio, error / bound);
    }
    if (std::isfinite(got) && std::isfinite(want)) {
      dot += got * want;
      norm_plugin += got * got;
      norm_exact += want * want;
    }
    if (std::isfinite(exact[i]) && std::isfinite(reference_same_dtype[i]))
      e.reference_max_abs_error = std::max(e.reference_max_abs_error, std::fabs(reference_same_dtype[i] - exact[i]));
    if (!ok) {
      if (mismatches == 0) e.first_mismatch = describe_mismatch(i, got, want, bound);
      ++mismatches;
      if (bit_exact || !std::isfinite(got)) e.worst_ratio = std::numeric_limits<double>::infinity();
    }
  }
  if (rounding_errors.size() >= kBiasMinimumSample) {
    double sum = 0;
    for (const auto& [want, error] : rounding_errors) sum += error;
    e.rounding_bias = sum / static_cast<double>(rounding_errors.size());
    if (std::fabs(e.rounding_bias) > kBiasLimit) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "rounds %s: mean error %+.2f half-ulps over %zu distinct values (round to nearest gives about "
                    "0; allowed +-%.1f)",
                    e.rounding_bias < 0 ? "toward zero" : "away from zero", e.rounding_bias, rounding_errors.size(),
                    kBiasLimit);
      if (mismatches == 0) e.first_mismatch = text;
      biased = true;
    }
  }
  e.mismatch_fraction = static_cast<double>(mismatches) / static_cast<double>(count);
  e.cosine_similarity = norm_plugin > 0 && norm_exact > 0 ? dot / std::sqrt(norm_plugin * norm_exact)
                                                          : (norm_plugin == norm_exact ? 1.0 : 0.0);
  e.needed_atol = e.max_abs_error;
  e.needed_rtol = e.max_rel_error;
  result.pass = mismatches == 0 && !biased;
  return result;
}

}  // namespace h2::conformance
