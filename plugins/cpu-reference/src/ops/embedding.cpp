// embedding (a row gather) with its deterministic backward, and rotary position embedding.
#include <cmath>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

void embedding_kernel(const TensorRef& weight, const TensorRef& indices, const TensorRef& y) {
  const int64_t vocab = weight.shape[0], dim = weight.shape[1];
  const std::vector<int64_t> ids = load_indices(indices);
  Values out(static_cast<size_t>(static_cast<int64_t>(ids.size()) * dim));
  for (size_t p = 0; p < ids.size(); ++p) {
    if (ids[p] < 0 || ids[p] >= vocab) index_error("index", ids[p], vocab);
    for (int64_t j = 0; j < dim; ++j)
      out[p * static_cast<size_t>(dim) + static_cast<size_t>(j)] =
          load_element(weight, ids[p] * weight.strides[0] + j * weight.strides[1]);
  }
  store(y, out);
}

void embedding_backward_kernel(const TensorRef& indices, const TensorRef& dy, const TensorRef& dweight) {
  const int64_t vocab = dweight.shape[0], dim = dweight.shape[1];
  const std::vector<int64_t> ids = load_indices(indices);
  const Values grad = load(dy);
  Values dw(static_cast<size_t>(vocab * dim), 0.0);
  for (size_t p = 0; p < ids.size(); ++p) {  // positions in order: a fixed summation order
    if (ids[p] < 0 || ids[p] >= vocab) index_error("index", ids[p], vocab);
    for (int64_t j = 0; j < dim; ++j)
      dw[static_cast<size_t>(ids[p] * dim + j)] += grad[p * static_cast<size_t>(dim) + static_cast<size_t>(j)];
  }
  store(dweight, dw);
}

void rotary_kernel(const TensorRef& x, const TensorRef& y, double base, int64_t position_offset, bool interleaved,
                   bool inverse) {
  const int r = x.rank;
  const int64_t seq = x.shape[r - 3], heads = x.shape[r - 2], head_dim = x.shape[r - 1], half = head_dim / 2;
  const Values in = load(x);
  Values out(in.size());
  const int64_t vectors = x.numel() / (head_dim == 0 ? 1 : head_dim);
  for (int64_t v = 0; v < vectors; ++v) {
    const int64_t position = position_offset + (v / heads) % seq;
    const size_t base_index = static_cast<size_t>(v * head_dim);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(position) *
                           std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim)) *
                           (inverse ? -1.0 : 1.0);
      const double c = std::cos(angle), s = std::sin(angle);
      const size_t a = base_index + static_cast<size_t>(interleaved ? 2 * i : i);
      const size_t b = base_index + static_cast<size_t>(interleaved ? 2 * i + 1 : i + half);
      out[a] = in[a] * c - in[b] * s;
      out[b] = in[a] * s + in[b] * c;
    }
  }
  store(y, out);
}

}  // namespace

H2_Status op_embedding(H2_Stream* stream, const H2_EmbeddingArgs* args) {
  return run_op("embedding", stream, args, [&](OpCall& call) {
    TensorRef w = call.tensor(args->weight, "weight"), idx = call.tensor(args->indices, "indices");
    TensorRef y = call.tensor(args->y, "y");
    call.enqueue([=] { embedding_kernel(w, idx, y); });
  });
}

H2_Status op_embedding_backward(H2_Stream* stream, const H2_EmbeddingBackwardArgs* args) {
  return run_op("embedding_backward", stream, args, [&](OpCall& call) {
    TensorRef idx = call.tensor(args->indices, "indices"), dy = call.tensor(args->dy, "dy");
    TensorRef dw = call.tensor(args->dweight, "dweight");
    call.enqueue([=] { embedding_backward_kernel(idx, dy, dw); });
  });
}

H2_Status op_rotary(H2_Stream* stream, const H2_RotaryArgs* args) {
  return run_op("rotary", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    const double base = args->base;
    const int64_t offset = args->position_offset;
    const bool interleaved = args->interleaved != 0, inverse = args->inverse != 0;
    call.enqueue([=] { rotary_kernel(x, y, base, offset, interleaved, inverse); });
  });
}

}  // namespace h2::cpu_reference
