// dropout, uniform and normal. The ABI fixes the random streams (Philox-4x32-10 with its counter
// layout) so that every device draws the same numbers; aclnn's generators (DropoutGenMask, the
// Inplace{Uniform,Normal} family) document neither their algorithm nor their counter layout, so the
// plugin cannot ask them for the ABI's streams. It computes the numbers on the host instead, from the
// seed, offset and shape alone (never from device data, so the call still does not wait for the
// device), and uploads them through page-locked staging; the device then applies them with aclnn
// operators (a cast into y, or a scaling and a masked fill for dropout). Host time: O(numel) per
// call, which a real kernel would do on the device: see docs/writing-a-plugin.md.
#include <cmath>
#include <numbers>
#include <vector>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "philox.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

int64_t count_of(const H2_Tensor& t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

// Word e % 4 of the block at counter offset + e / 4: the ABI's stream for logical element e.
uint32_t word(uint64_t seed, uint64_t offset, int64_t e) {
  return h2::plugin::philox_block(seed, offset + static_cast<uint64_t>(e) / 4)[static_cast<size_t>(e % 4)];
}

template <typename T>
void upload(Stream& stream, const H2_Tensor& to, const std::vector<T>& values) {
  if (values.empty()) return;
  runtime().staging().to_device(stream.stream, to.data, values.data(), values.size() * sizeof(T));
}

}  // namespace

H2_Status op_uniform(H2_Stream* handle, const H2_UniformArgs* args) {
  return guarded("uniform", [&] {
    auto stream = runtime().stream(handle);
    runtime().bind(stream->device);
    const int64_t n = count_of(args->y);
    std::vector<float> values(static_cast<size_t>(n));
    const auto range = static_cast<float>(args->high - args->low), low = static_cast<float>(args->low);
    for (int64_t e = 0; e < n; ++e) {
      const float u = static_cast<float>(word(args->seed, args->offset, e) >> 8) * 0x1p-24f;
      values[static_cast<size_t>(e)] = std::fma(u, range, low);
    }
    ScratchTensor drawn(*stream, H2_DTYPE_F32, shape_of(args->y));
    upload(*stream, drawn.tensor, values);
    copy_tensor(*stream, args->y, drawn.tensor);
  });
}

H2_Status op_normal(H2_Stream* handle, const H2_NormalArgs* args) {
  return guarded("normal", [&] {
    auto stream = runtime().stream(handle);
    runtime().bind(stream->device);
    const int64_t n = count_of(args->y);
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t block = 0; block * 4 < n; ++block) {
      const h2::plugin::PhiloxBlock w =
          h2::plugin::philox_block(args->seed, args->offset + static_cast<uint64_t>(block));
      for (int pair = 0; pair < 2; ++pair) {
        const double u1 = (static_cast<double>(w[static_cast<size_t>(2 * pair)] >> 8) + 1) * 0x1p-24;
        const double u2 = static_cast<double>(w[static_cast<size_t>(2 * pair + 1)] >> 8) * 0x1p-24;
        const double r = std::sqrt(-2 * std::log(u1));
        const double z[2] = {r * std::cos(2 * std::numbers::pi * u2), r * std::sin(2 * std::numbers::pi * u2)};
        for (int k = 0; k < 2; ++k) {
          const int64_t e = block * 4 + 2 * pair + k;
          if (e < n) values[static_cast<size_t>(e)] = static_cast<float>(args->mean + args->std * z[k]);
        }
      }
    }
    ScratchTensor drawn(*stream, H2_DTYPE_F32, shape_of(args->y));
    upload(*stream, drawn.tensor, values);
    copy_tensor(*stream, args->y, drawn.tensor);
  });
}

H2_Status op_dropout(H2_Stream* handle, const H2_DropoutArgs* args) {
  return guarded("dropout", [&] {
    auto stream = runtime().stream(handle);
    runtime().bind(stream->device);
    const int64_t n = count_of(args->x);
    const auto threshold = static_cast<uint32_t>(std::floor(args->p * 0x1p24));
    std::vector<uint8_t> keep(static_cast<size_t>(n)), drop(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      keep[static_cast<size_t>(e)] = (word(args->seed, args->offset, e) >> 8) >= threshold ? 1 : 0;
      drop[static_cast<size_t>(e)] = 1 - keep[static_cast<size_t>(e)];
    }
    ScratchTensor kept(*stream, H2_DTYPE_BOOL, shape_of(args->x)), dropped(*stream, H2_DTYPE_BOOL, shape_of(args->x));
    upload(*stream, kept.tensor, keep);
    upload(*stream, dropped.tensor, drop);
    TensorOps ops{*stream};
    ops.divs(args->y, args->x, 1 - args->p);
    ops.masked_fill(args->y, dropped.tensor, 0.0);
    if (args->mask.data != nullptr) copy_tensor(*stream, args->mask, kept.tensor);
  });
}

}  // namespace h2::ascend
