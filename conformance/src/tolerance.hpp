// The tolerance policy: the one place that decides whether an output is close enough.
//
// A plugin's output is compared with the exact result: the same operator on the same input values,
// computed by the cpu-reference plugin in fp64. The contract lets a device accumulate in fp32 and
// round to the output dtype at the end, so the error it is entitled to is
//
//     bound_i = 2 u_out |exact_i|  +  (1 + 2 u_out) (c + n) u_acc m_i  +  floor_out
//
//   u_out      unit roundoff of the output dtype (f32 2^-24, f16 2^-11, bf16 2^-8), half an ulp.
//              2 u_out is one ulp: the final rounding may land on either neighbour of the exact
//              value (faithful rounding). Correct rounding (half an ulp) is what the reference
//              itself achieves, so a bound of half an ulp put the reference at 0.99 of it and left no
//              room between "correct" and "failed"; with one ulp the reference sits at 0.5 at most
//              (the report's WORST), and a device that rounds an fp32 value carrying its own small
//              error is not failed for landing on the far neighbour.
//   u_acc      2^-24: the contract's fp32 accumulation and intermediates.
//   n          the operator's reduction length (K of a gemm, the row of a softmax or a norm, the
//              keys of attention...). Recursive fp32 summation of n terms errs by at most about
//              n * u_acc * sum|terms|, whatever order or blocking the device uses, so a correct
//              plugin is never failed for summing differently.
//   m_i        the scale of the terms: |exact_i| for elementwise results; the row's or tensor's
//              largest |exact| where results cancel; for sums of products, the exact result of
//              the same operator on |inputs| (the sum of |terms| itself).
//   (1 + 2 u_out) the final rounding of an fp32 value that is itself off by up to (c + n) u_acc m_i.
//   c          a small per-operator allowance, in fp32 units, for fp32 math-library error and
//              intermediate roundings (exp, erf, rsqrt, ...).
//   floor_out  the smallest normal number of the output dtype, so a device that flushes
//              subnormal results to zero is not failed for it.
//
// What the bound catches and what it cannot. A 16-bit accumulator (one f16 or bf16 ulp per step,
// the usual shortcut) errs by about n * 2^-11 or n * 2^-8 of the terms, far beyond n * 2^-24: it
// fails wherever the output keeps the difference (f32 outputs, and gemm into an f32 C from 16-bit
// inputs), see Tolerance.OneUlpPerStepOfA16BitAccumulatorShows. An fp32 accumulation that loses one
// fp32 ulp per step of a positive sum errs by about n * u_acc * sum|terms|, which is exactly what a
// legal fp32 summation in an unlucky order may err by: no order-independent bound can tell them
// apart, and failing legal orders is worse, so the suite does not try.
//
// One ulp per element would let a device truncate (round toward zero) every result and pass. So
// where the final rounding dominates the bound (at least 4 times the rest), the errors of at least 64
// distinct exact values are averaged, signed away from zero and in half-ulps: round to nearest gives
// about 0 (the reference stays below 0.1), truncation about -1, rounding away from zero about +1.
// Beyond +-0.5 the output fails ("rounds toward zero").
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

// Equal, or both NaN: an element left as it was, or a non-finite result matched.
bool same_value(double a, double b);

// The smallest normal number of a float dtype (0 for integer dtypes).
double smallest_normal(DType dtype);

}  // namespace h2::conformance
