// Dropout, uniform and normal on the Philox-4x32-10 stream the ABI defines, with the same generator
// code as the reference (plugins/common/philox.hpp), so masks and uniform values are bit-identical.
// One thread per Philox block: its four words serve four consecutive elements.
#include <cmath>

#include "map.cuh"
#include "op_table.hpp"
#include "philox.hpp"

namespace h2::cuda {
namespace {

using h2::plugin::philox_block;
using h2::plugin::PhiloxBlock;

// Runs f(element, word) for every element of an n-element tensor, one Philox block per thread.
template <typename F>
void for_each_word(const OpLaunch& l, int64_t n, uint64_t seed, uint64_t offset, F f) {
  const int64_t blocks = (n + 3) / 4;
  launch_map(l, blocks, [=] __device__(int64_t b) {
    const PhiloxBlock words = philox_block(seed, offset + static_cast<uint64_t>(b));
    for (int w = 0; w < 4; ++w) {
      const int64_t e = b * 4 + w;
      if (e < n) f(e, words, w);
    }
  });
}

}  // namespace

H2_Status op_dropout(H2_Stream* stream, const H2_DropoutArgs* args) {
  return run_op("dropout", stream, args, [&](OpLaunch& l) {
    if (!(args->p >= 0 && args->p < 1)) fail(H2_STATUS_INVALID_ARGUMENT, "p must be in [0, 1)");
    const View x = make_view(args->x), y = make_view(args->y), mask = make_view(args->mask);
    const uint32_t threshold = static_cast<uint32_t>(std::floor(args->p * 16777216.0));
    const double keep_scale = 1 / (1 - args->p);
    for_each_word(l, numel(args->y), args->seed, args->offset,
                  [=] __device__(int64_t e, const PhiloxBlock& words, int w) {
                    const bool keep = (words[w] >> 8) >= threshold;
                    const double v = load(x, offset_of(x, e));
                    store_any(y, offset_of(y, e), keep ? v * keep_scale : 0.0);
                    if (mask.data != nullptr) reinterpret_cast<uint8_t*>(mask.data)[offset_of(mask, e)] = keep;
                  });
  });
}

H2_Status op_uniform(H2_Stream* stream, const H2_UniformArgs* args) {
  return run_op("uniform", stream, args, [&](OpLaunch& l) {
    const View y = make_view(args->y);
    const float width = static_cast<float>(args->high - args->low), low = static_cast<float>(args->low);
    for_each_word(l, numel(args->y), args->seed, args->offset,
                  [=] __device__(int64_t e, const PhiloxBlock& words, int w) {
                    const float u = static_cast<float>(words[w] >> 8) * 0x1p-24f;
                    store(y, offset_of(y, e), fmaf(u, width, low));
                  });
  });
}

H2_Status op_normal(H2_Stream* stream, const H2_NormalArgs* args) {
  return run_op("normal", stream, args, [&](OpLaunch& l) {
    const View y = make_view(args->y);
    const double mean = args->mean, std_dev = args->std;
    for_each_word(l, numel(args->y), args->seed, args->offset,
                  [=] __device__(int64_t e, const PhiloxBlock& words, int w) {
                    const int a = w & ~1;  // the pair (a, a + 1) this word belongs to
                    const double u1 = (static_cast<double>(words[a] >> 8) + 1) * 0x1p-24;
                    const double u2 = static_cast<double>(words[a + 1] >> 8) * 0x1p-24;
                    const double r = sqrt(-2 * log(u1));
                    const double z = w == a ? r * cospi(2 * u2) : r * sinpi(2 * u2);
                    store_any(y, offset_of(y, e), mean + std_dev * z);
                  });
  });
}

}  // namespace h2::cuda
