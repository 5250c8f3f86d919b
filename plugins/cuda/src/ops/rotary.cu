// Rotary position embedding over [..., seq, heads, head_dim]: one thread per rotated pair.
#include <cmath>

#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {

H2_Status op_rotary(H2_Stream* stream, const H2_RotaryArgs* args) {
  return run_op("rotary", stream, args, [&](OpLaunch& l) {
    const H2_Tensor& t = args->x;
    if (t.rank < 3) fail(H2_STATUS_INVALID_ARGUMENT, "x needs [..., seq, heads, head_dim]");
    const View x = make_view(args->x), y = make_view(args->y);
    const int64_t dim = t.shape[t.rank - 1], heads = t.shape[t.rank - 2], seq = t.shape[t.rank - 3];
    const int64_t half = dim / 2, pairs = numel(t) / 2;
    const double log_base = std::log(args->base);
    const int64_t position_offset = args->position_offset;
    const bool interleaved = args->interleaved != 0;
    const double sign = args->inverse != 0 ? -1.0 : 1.0;
    launch_map(l, pairs, [=] __device__(int64_t p) {
      const int64_t i = p % half;       // the pair within the head
      const int64_t vector = p / half;  // [..., seq, heads] flattened
      const int64_t position = position_offset + (vector / heads) % seq;
      const int64_t first = vector * dim + (interleaved ? 2 * i : i);
      const int64_t second = first + (interleaved ? 1 : half);
      const double angle = static_cast<double>(position) * exp(-log_base * (2.0 * i) / dim);
      double s, c;
      sincos(sign * angle, &s, &c);
      const double a = load(x, offset_of(x, first)), b = load(x, offset_of(x, second));
      store_any(y, offset_of(y, first), a * c - b * s);
      store_any(y, offset_of(y, second), a * s + b * c);
    });
  });
}

}  // namespace h2::cuda
