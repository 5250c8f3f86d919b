// dropout, uniform and normal from Philox-4x32-10, exactly as plugin_abi.h defines the streams, so
// every device draws the same numbers for the same seed and offset.
#include <cmath>
#include <numbers>
#include <vector>

#include "common.hpp"
#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

// The 32-bit word for element e.
uint32_t word(uint64_t seed, uint64_t offset, int64_t e) {
  return philox_block(seed, offset + static_cast<uint64_t>(e) / 4)[static_cast<size_t>(e % 4)];
}

constexpr float kTwoPowMinus24 = 0x1p-24f;

void dropout_kernel(const TensorRef& x, const TensorRef& y, const TensorRef& mask, double p, uint64_t seed,
                    uint64_t offset) {
  const auto threshold = static_cast<uint32_t>(std::floor(p * 0x1p24));
  const Values in = load(x);
  Values out(in.size()), keep(in.size());
  for (size_t e = 0; e < in.size(); ++e) {
    keep[e] = (word(seed, offset, static_cast<int64_t>(e)) >> 8) >= threshold ? 1.0 : 0.0;
    out[e] = keep[e] != 0 ? in[e] / (1 - p) : 0.0;
  }
  store(y, out);
  if (mask.present) store(mask, keep);
}

void uniform_kernel(const TensorRef& y, double low, double high, uint64_t seed, uint64_t offset) {
  const auto span = static_cast<float>(high - low);
  const auto start = static_cast<float>(low);
  Values out(static_cast<size_t>(y.numel()));
  for (size_t e = 0; e < out.size(); ++e) {
    const float u = static_cast<float>(word(seed, offset, static_cast<int64_t>(e)) >> 8) * kTwoPowMinus24;
    out[e] = std::fma(u, span, start);  // fmaf: one rounding, reproducible on any IEEE device
  }
  store(y, out);
}

void normal_kernel(const TensorRef& y, double mean, double std_dev, uint64_t seed, uint64_t offset) {
  const int64_t n = y.numel();
  Values out(static_cast<size_t>(n));
  for (int64_t block = 0; block * 4 < n; ++block) {
    const PhiloxBlock w = philox_block(seed, offset + static_cast<uint64_t>(block));
    for (int pair = 0; pair < 2; ++pair) {
      const double u1 = (static_cast<double>(w[static_cast<size_t>(2 * pair)] >> 8) + 1) * 0x1p-24;
      const double u2 = static_cast<double>(w[static_cast<size_t>(2 * pair + 1)] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2 * std::log(u1));
      const double z[2] = {r * std::cos(2 * std::numbers::pi * u2), r * std::sin(2 * std::numbers::pi * u2)};
      for (int half = 0; half < 2; ++half) {
        const int64_t e = block * 4 + 2 * pair + half;
        if (e < n) out[static_cast<size_t>(e)] = mean + std_dev * z[half];
      }
    }
  }
  store(y, out);
}

}  // namespace

H2_Status op_dropout(H2_Stream* stream, const H2_DropoutArgs* args) {
  return run_op("dropout", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y"), mask = call.tensor(args->mask, "mask");
    const double p = args->p;
    const uint64_t seed = args->seed, offset = args->offset;
    call.enqueue([=] { dropout_kernel(x, y, mask, p, seed, offset); });
  });
}

H2_Status op_uniform(H2_Stream* stream, const H2_UniformArgs* args) {
  return run_op("uniform", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y");
    const double low = args->low, high = args->high;
    const uint64_t seed = args->seed, offset = args->offset;
    call.enqueue([=] { uniform_kernel(y, low, high, seed, offset); });
  });
}

H2_Status op_normal(H2_Stream* stream, const H2_NormalArgs* args) {
  return run_op("normal", stream, args, [&](OpCall& call) {
    TensorRef y = call.tensor(args->y, "y");
    const double mean = args->mean, std_dev = args->std;
    const uint64_t seed = args->seed, offset = args->offset;
    call.enqueue([=] { normal_kernel(y, mean, std_dev, seed, offset); });
  });
}

}  // namespace h2::cpu_reference
