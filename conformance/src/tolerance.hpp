// The tolerance policy: the one place that decides whether an output is close enough.
//
// A plugin's output is compared with the exact result: the same operator on the same input values,
// computed by the cpu-reference plugin in fp64. The contract lets a device accumulate in fp32 and
// requires one rounding to the output dtype, so the error it is entitled to is
//
//     bound_i = u_out * |exact_i|  +  (1 + u_out) * (c + n) * u_acc * m_i  +  floor_out
//
//   u_out      unit roundoff of the output dtype (f32 2^-24, f16 2^-11, bf16 2^-8): the final
//              rounding to nearest, half an ulp. This is exactly the error a same-dtype computation
//              inherently has against fp64, and the report prints the reference's own error in the
//              same dtype next to the plugin's for comparison.
//   u_acc      2^-24: the contract's fp32 accumulation and intermediates.
//   n          the operator's reduction length (K of a gemm, the row of a softmax or a norm, the
//              keys of attention...). Recursive fp32 summation of n terms errs by at most about
//              n * u_acc * sum|terms|, whatever order or blocking the device uses, so a correct
//              plugin is never failed for summing differently.
//   m_i        the scale of the terms: |exact_i| for elementwise results; the row's or tensor's
//              largest |exact| where results cancel; for sums of products, the exact result of
//              the same operator on |inputs| (the sum of |terms| itself).
//   (1 + u_out) the final rounding of an fp32 value that is itself off by up to (c + n) u_acc m_i.
//   c          a small per-operator allowance, in fp32 units, for fp32 math-library error and
//              intermediate roundings (exp, erf, rsqrt, ...).
//   floor_out  the smallest normal number of the output dtype, so a device that flushes
//              subnormal results to zero is not failed for it.
//
// NaN must give NaN and an infinity the same infinity. Operators whose result is fully determined
// (data movement, casts, selections, the Philox streams, powers-of-two scaling) are "bit-exact":
// they must equal the reference computed in the output dtype exactly.
//
// The constants are not editable by vendors: the only way to accept a failing case is an entry in
// the suite's one waiver file, with a reason and an expiry date, reported as "waived".
#pragma once

#include <string>
#include <vector>

#include "case.hpp"
#include "h2/conformance.hpp"

namespace h2::conformance {

// How one output's error is bounded.
enum class Magnitude {
  exact,       // |exact_i|: elementwise results
  row,         // max |exact| over the element's row (last dimension): row-wise results
  tensor,      // max |exact| over the whole output: results that cancel (most backwards)
  abs_inputs,  // the exact result for |inputs|: sums of products, without their cancellation
};

struct ErrorModel {
  Magnitude magnitude = Magnitude::exact;
  double c = 0;            // allowance for fp32 intermediate and math-library error, in fp32 units
  int64_t n = 0;           // reduction length
  bool bit_exact = false;  // must equal the reference in the output's dtype, bit for bit
};

// The model for an output of a case, from the table of operators in tolerance.cpp.
ErrorModel error_model(const Case& c, const std::string& output);

using HostValues = std::vector<double>;

struct Comparison {
  bool pass = true;
  OutputError error;
};

// Judges one output. `magnitude` is the abs-inputs run (only for Magnitude::abs_inputs).
Comparison compare_output(const std::string& name, DType dtype, const Shape& shape, const ErrorModel& model,
                          const HostValues& plugin, const HostValues& exact, const HostValues& reference_same_dtype,
                          const HostValues& magnitude);

// Unit roundoff of a dtype (0 for integer dtypes, which must match exactly).
double unit_roundoff(DType dtype);

}  // namespace h2::conformance
