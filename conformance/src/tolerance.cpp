#include "tolerance.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

namespace h2::conformance {

namespace {

constexpr double kFp32Accumulation = 0x1p-24;

double smallest_normal(DType dtype) {
  switch (dtype) {
    case DType::f16: return 0x1p-14;
    case DType::f32:
    case DType::bf16: return 0x1p-126;
    case DType::f64: return 0x1p-1022;
    default: return 0;
  }
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

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

}  // namespace

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
  double dot = 0, norm_plugin = 0, norm_exact = 0;
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
      bound = u_out * std::fabs(want) +
              (1 + u_out) * (model.c + static_cast<double>(model.n)) * kFp32Accumulation * m[i] + floor_out;
      const double error = std::fabs(got - want);
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
  e.mismatch_fraction = static_cast<double>(mismatches) / static_cast<double>(count);
  e.cosine_similarity = norm_plugin > 0 && norm_exact > 0 ? dot / std::sqrt(norm_plugin * norm_exact)
                                                          : (norm_plugin == norm_exact ? 1.0 : 0.0);
  e.needed_atol = e.max_abs_error;
  e.needed_rtol = e.max_rel_error;
  result.pass = mismatches == 0;
  return result;
}

}  // namespace h2::conformance
