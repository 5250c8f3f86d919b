// dropout, uniform and normal. The ABI fixes the random streams (Philox-4x32-10 with its counter
// layout) so that every device draws the same numbers; the vendors' generators document neither
// their algorithm nor their counter layout, so a plugin cannot ask them for the ABI's streams. The
// numbers are computed on the host instead, from the seed, offset and shape alone (never from device
// data, so the call still does not wait for the device), and uploaded; the device then applies them
// (a cast into y, or a scaling and a masked fill for dropout). Host time: O(numel) per call, which a
// vendor kernel would do on the device: see docs/writing-a-plugin.md.
#include <cmath>
#include <numbers>
#include <vector>

#include "composed_ops.hpp"
#include "philox.hpp"
#include "tensor_views.hpp"

namespace h2::plugin::composed {
namespace {

int64_t count_of(const H2_Tensor& t) {
  return element_count(t);
}

// Word e % 4 of the block at counter offset + e / 4: the ABI's stream for logical element e.
uint32_t word(uint64_t seed, uint64_t offset, int64_t e) {
  return philox_block(seed, offset + static_cast<uint64_t>(e) / 4)[static_cast<size_t>(e % 4)];
}

template <typename T>
void upload(DeviceMath& math, const H2_Tensor& to, const std::vector<T>& values) {
  if (!values.empty()) math.upload(to, values.data(), values.size() * sizeof(T));
}

// FP32 values drawn on the host into y (rounded to y's dtype on the device).
void place(DeviceMath& math, const H2_Tensor& y, const std::vector<float>& values) {
  auto drawn = math.scratch(H2_DTYPE_F32, shape_of(y));
  upload(math, drawn->tensor, values);
  math.copy(y, drawn->tensor);
}

}  // namespace

void uniform(DeviceMath& math, const H2_UniformArgs& args) {
  const int64_t n = count_of(args.y);
  std::vector<float> values(static_cast<size_t>(n));
  const auto range = static_cast<float>(args.high - args.low), low = static_cast<float>(args.low);
  for (int64_t e = 0; e < n; ++e) {
    const float u = static_cast<float>(word(args.seed, args.offset, e) >> 8) * 0x1p-24f;
    values[static_cast<size_t>(e)] = std::fma(u, range, low);
  }
  place(math, args.y, values);
}

void normal(DeviceMath& math, const H2_NormalArgs& args) {
  const int64_t n = count_of(args.y);
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t block = 0; block * 4 < n; ++block) {
    const PhiloxBlock w = philox_block(args.seed, args.offset + static_cast<uint64_t>(block));
    for (int pair = 0; pair < 2; ++pair) {
      const double u1 = (static_cast<double>(w[static_cast<size_t>(2 * pair)] >> 8) + 1) * 0x1p-24;
      const double u2 = static_cast<double>(w[static_cast<size_t>(2 * pair + 1)] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2 * std::log(u1));
      const double z[2] = {r * std::cos(2 * std::numbers::pi * u2), r * std::sin(2 * std::numbers::pi * u2)};
      for (int k = 0; k < 2; ++k) {
        const int64_t e = block * 4 + 2 * pair + k;
        if (e < n) values[static_cast<size_t>(e)] = static_cast<float>(args.mean + args.std * z[k]);
      }
    }
  }
  place(math, args.y, values);
}

void dropout(DeviceMath& math, const H2_DropoutArgs& args) {
  const int64_t n = count_of(args.x);
  const auto threshold = static_cast<uint32_t>(std::floor(args.p * 0x1p24));
  std::vector<uint8_t> keep(static_cast<size_t>(n)), drop(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    keep[static_cast<size_t>(e)] = (word(args.seed, args.offset, e) >> 8) >= threshold ? 1 : 0;
    drop[static_cast<size_t>(e)] = 1 - keep[static_cast<size_t>(e)];
  }
  auto kept = math.scratch(H2_DTYPE_BOOL, shape_of(args.x)), dropped = math.scratch(H2_DTYPE_BOOL, shape_of(args.x));
  upload(math, kept->tensor, keep);
  upload(math, dropped->tensor, drop);
  math.divide(args.y, args.x, 1 - args.p);
  math.masked_fill(args.y, dropped->tensor, 0.0);
  if (args.mask.data != nullptr) math.copy(args.mask, kept->tensor);
}

}  // namespace h2::plugin::composed
