// Fused causal attention in the manner of FlashAttention (Dao et al.): the forward streams key/value
// tiles through shared memory with an online softmax, so the [seq_q, seq_k] score matrix is never
// stored; the backward recomputes the probabilities tile by tile from the saved log-sum-exp. The
// backward is deterministic: one kernel owns each key tile (dk, dv summed over the query heads that
// share it, in order) and one each query tile (dq), so no atomics are needed.
//
// Tiles are 32 queries x 32 keys, four threads per row, fp32 arithmetic in shared memory (rows
// padded by one word against bank conflicts). head_dim up to 256.
#include "launch.cuh"
#include "map.cuh"
#include "op_table.hpp"

namespace h2::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kParts = 4;  // threads per row; they are consecutive lanes of one warp
constexpr int kAttentionThreads = kTile * kParts;
constexpr int kPerThread = kTile / kParts;  // scores each thread computes per tile

struct Shape {
  int64_t heads, kv_heads, seq_q, seq_k;
  int dim;
};

__device__ int64_t at(const View& t, int64_t b, int64_t h, int64_t s, int64_t d) {
  return b * t.strides[0] + h * t.strides[1] + s * t.strides[2] + d * t.strides[3];
}

__device__ int64_t lse_at(const View& t, int64_t b, int64_t h, int64_t s) {
  return b * t.strides[0] + h * t.strides[1] + s * t.strides[2];
}

// Rows [first, first + kTile) of the [seq, dim] matrix of (b, h) into `tile` (pitch dim + 1);
// rows past `seq` become 0.
__device__ void load_tile(const View& t, int64_t b, int64_t h, int64_t first, int64_t seq, int dim, float* tile) {
  for (int e = threadIdx.x; e < kTile * dim; e += blockDim.x) {
    const int r = e / dim, d = e % dim;
    tile[r * (dim + 1) + d] = first + r < seq ? load(t, at(t, b, h, first + r, d)) : 0.0f;
  }
}

__device__ float dot(const float* a, const float* b, int dim) {
  float sum = 0;
  for (int d = 0; d < dim; ++d) sum += a[d] * b[d];
  return sum;
}

__device__ float row_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

__device__ float row_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

// One past the last key a tile of queries [q0, q0 + kTile) can see.
__device__ int64_t key_end(const Shape& g, int64_t q0, bool causal) {
  if (!causal) return g.seq_k;
  const int64_t last_query = min(q0 + kTile, g.seq_q) - 1;
  return max(int64_t{0}, min(g.seq_k, last_query + (g.seq_k - g.seq_q) + 1));
}

__device__ bool visible(const Shape& g, int64_t i, int64_t j, bool causal) {
  return i < g.seq_q && j < g.seq_k && (!causal || j <= i + (g.seq_k - g.seq_q));
}

// How many keys of the tile starting at k0 query i sees: the first ones, up to kTile. Sums over a
// tile stop there, so a key the query does not see (the future, or past seq_k) is not read at all:
// a probability of 0 times a NaN or an infinity in that key's row would be NaN.
__device__ int visible_keys(const Shape& g, int64_t i, int64_t k0, bool causal) {
  if (i >= g.seq_q) return 0;
  const int64_t end = causal ? min(g.seq_k, i + (g.seq_k - g.seq_q) + 1) : g.seq_k;
  return static_cast<int>(max(int64_t{0}, min(int64_t{kTile}, end - k0)));
}

// The queries of the tile starting at q0 that see key j: [first, last) within the tile.
__device__ void visible_queries(const Shape& g, int64_t j, int64_t q0, bool causal, int& first, int& last) {
  const int64_t begin = j >= g.seq_k ? g.seq_q : causal ? max(int64_t{0}, j - (g.seq_k - g.seq_q)) : 0;
  first = static_cast<int>(min(int64_t{kTile}, max(int64_t{0}, begin - q0)));
  last = static_cast<int>(max(int64_t{first}, min(int64_t{kTile}, g.seq_q - q0)));
}

template <int kChunks>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_forward_kernel(View q, View k, View v, View o, View lse, Shape g, float scale, bool causal) {
  extern __shared__ float smem[];
  const int dim = g.dim, pitch = dim + 1;
  float* qs = smem;
  float* ks = qs + kTile * pitch;
  float* vs = ks + kTile * pitch;
  float* ps = vs + kTile * pitch;  // [query][key], pitch kTile + 1
  const int64_t b = blockIdx.y / g.heads, h = blockIdx.y % g.heads, kv = h / (g.heads / g.kv_heads);
  const int64_t q0 = blockIdx.x * int64_t{kTile};
  const int row = threadIdx.x / kParts, part = threadIdx.x % kParts;
  const int64_t i = q0 + row;

  load_tile(q, b, h, q0, g.seq_q, dim, qs);
  float acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0;
  float m = -INFINITY, l = 0;

  const int64_t end = key_end(g, q0, causal);
  for (int64_t k0 = 0; k0 < end; k0 += kTile) {
    __syncthreads();  // the previous tile's readers are done
    load_tile(k, b, kv, k0, g.seq_k, dim, ks);
    load_tile(v, b, kv, k0, g.seq_k, dim, vs);
    __syncthreads();
    float s[kPerThread];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const int j = part + kParts * c;
      s[c] = visible(g, i, k0 + j, causal) ? scale * dot(qs + row * pitch, ks + j * pitch, dim) : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    const float m_new = fmaxf(m, row_max(tile_max));
    const float correction = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float sum = 0;
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const float p = s[c] == -INFINITY ? 0.0f : expf(s[c] - m_new);
      ps[row * (kTile + 1) + part + kParts * c] = p;
      sum += p;
    }
    l = l * correction + row_sum(sum);
    m = m_new;
    __syncwarp();  // a row's probabilities come from its own four lanes
    const int seen = visible_keys(g, i, k0, causal);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = part + kParts * c;
      if (d < dim) {
        float pv = 0;
        for (int j = 0; j < seen; ++j) pv += ps[row * (kTile + 1) + j] * vs[j * pitch + d];
        acc[c] = acc[c] * correction + pv;
      }
    }
  }
  if (i >= g.seq_q) return;
  // Only a row that sees no key at all (causal, seq_q > seq_k) is masked: o = 0, lse = -inf. A row
  // that sees keys whose scores are all -inf (an infinite input) has l = 0 here, and is NaN, as the
  // reference's exp(-inf - max) with max = -inf makes it (the first H100 run of suite 1.3 gave 0).
  const bool sees_keys = visible_keys(g, i, 0, causal) > 0;
  const float inverse = l > 0 ? 1 / l : sees_keys ? NAN : 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = part + kParts * c;
    if (d < dim) store(o, at(o, b, h, i, d), acc[c] * inverse);
  }
  if (part == 0) store(lse, lse_at(lse, b, h, i), l > 0 ? m + logf(l) : sees_keys ? NAN : -INFINITY);
}

// dk and dv of one key tile, over every query of every query head sharing the kv head.
template <int kChunks>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_dkdv_kernel(View q, View k, View v, View dout, View lse, const float* delta, View dk, View dv, Shape g,
                          float scale, bool causal) {
  extern __shared__ float smem[];
  const int dim = g.dim, pitch = dim + 1;
  float* ks = smem;
  float* vs = ks + kTile * pitch;
  float* qs = vs + kTile * pitch;
  float* dos = qs + kTile * pitch;
  float* ps = dos + kTile * pitch;        // [query][key]
  float* dss = ps + kTile * (kTile + 1);  // [query][key]
  const int64_t b = blockIdx.y / g.kv_heads, kv = blockIdx.y % g.kv_heads, group = g.heads / g.kv_heads;
  const int64_t k0 = blockIdx.x * int64_t{kTile};
  const int row = threadIdx.x / kParts, part = threadIdx.x % kParts;
  const int64_t j = k0 + row;

  load_tile(k, b, kv, k0, g.seq_k, dim, ks);
  load_tile(v, b, kv, k0, g.seq_k, dim, vs);
  float dk_acc[kChunks], dv_acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) dk_acc[c] = dv_acc[c] = 0;

  // Causal: the first query that sees key k0 is k0 - (seq_k - seq_q).
  const int64_t first_query = causal ? max(int64_t{0}, k0 - (g.seq_k - g.seq_q)) / kTile * kTile : 0;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = kv * group + hh;
    for (int64_t q0 = first_query; q0 < g.seq_q; q0 += kTile) {
      __syncthreads();
      load_tile(q, b, h, q0, g.seq_q, dim, qs);
      load_tile(dout, b, h, q0, g.seq_q, dim, dos);
      __syncthreads();
#pragma unroll
      for (int c = 0; c < kPerThread; ++c) {
        const int qi = part + kParts * c;
        const int64_t i = q0 + qi;
        float p = 0, ds = 0;
        if (visible(g, i, j, causal)) {
          p = expf(scale * dot(qs + qi * pitch, ks + row * pitch, dim) - load(lse, lse_at(lse, b, h, i)));
          const float dp = dot(dos + qi * pitch, vs + row * pitch, dim);
          ds = p * (dp - delta[(b * g.heads + h) * g.seq_q + i]);
        }
        ps[qi * (kTile + 1) + row] = p;
        dss[qi * (kTile + 1) + row] = ds;
      }
      __syncwarp();  // a key's column comes from its own four lanes
      int first, last;
      visible_queries(g, j, q0, causal, first, last);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d = part + kParts * c;
        if (d < dim) {
          float sv = 0, sk = 0;
          for (int qi = first; qi < last; ++qi) {
            sv += ps[qi * (kTile + 1) + row] * dos[qi * pitch + d];
            sk += dss[qi * (kTile + 1) + row] * qs[qi * pitch + d];
          }
          dv_acc[c] += sv;
          dk_acc[c] += scale * sk;
        }
      }
    }
  }
  if (j >= g.seq_k) return;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = part + kParts * c;
    if (d < dim) {
      store(dk, at(dk, b, kv, j, d), dk_acc[c]);
      store(dv, at(dv, b, kv, j, d), dv_acc[c]);
    }
  }
}

// dq of one query tile.
template <int kChunks>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_dq_kernel(View q, View k, View v, View dout, View lse, const float* delta, View dq, Shape g, float scale,
                        bool causal) {
  extern __shared__ float smem[];
  const int dim = g.dim, pitch = dim + 1;
  float* qs = smem;
  float* dos = qs + kTile * pitch;
  float* ks = dos + kTile * pitch;
  float* vs = ks + kTile * pitch;
  float* dss = vs + kTile * pitch;  // [query][key]
  const int64_t b = blockIdx.y / g.heads, h = blockIdx.y % g.heads, kv = h / (g.heads / g.kv_heads);
  const int64_t q0 = blockIdx.x * int64_t{kTile};
  const int row = threadIdx.x / kParts, part = threadIdx.x % kParts;
  const int64_t i = q0 + row;

  load_tile(q, b, h, q0, g.seq_q, dim, qs);
  load_tile(dout, b, h, q0, g.seq_q, dim, dos);
  const float row_lse = i < g.seq_q ? load(lse, lse_at(lse, b, h, i)) : 0.0f;
  const float row_delta = i < g.seq_q ? delta[(b * g.heads + h) * g.seq_q + i] : 0.0f;
  float dq_acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) dq_acc[c] = 0;

  const int64_t end = key_end(g, q0, causal);
  for (int64_t k0 = 0; k0 < end; k0 += kTile) {
    __syncthreads();
    load_tile(k, b, kv, k0, g.seq_k, dim, ks);
    load_tile(v, b, kv, k0, g.seq_k, dim, vs);
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kPerThread; ++c) {
      const int kj = part + kParts * c;
      float ds = 0;
      if (visible(g, i, k0 + kj, causal)) {
        const float p = expf(scale * dot(qs + row * pitch, ks + kj * pitch, dim) - row_lse);
        ds = p * (dot(dos + row * pitch, vs + kj * pitch, dim) - row_delta);
      }
      dss[row * (kTile + 1) + kj] = ds;
    }
    __syncwarp();
    const int seen = visible_keys(g, i, k0, causal);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = part + kParts * c;
      if (d < dim) {
        float sum = 0;
        for (int kj = 0; kj < seen; ++kj) sum += dss[row * (kTile + 1) + kj] * ks[kj * pitch + d];
        dq_acc[c] += scale * sum;
      }
    }
  }
  if (i >= g.seq_q) return;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = part + kParts * c;
    if (d < dim) store(dq, at(dq, b, h, i, d), dq_acc[c]);
  }
}

Shape shape_of(const H2_Tensor& q, const H2_Tensor& k) {
  if (q.rank != 4 || k.rank != 4) fail(H2_STATUS_INVALID_ARGUMENT, "q and k must be [batch, heads, seq, dim]");
  if (q.shape[3] > 256) fail(H2_STATUS_UNSUPPORTED, "head_dim " + std::to_string(q.shape[3]) + " > 256");
  return {q.shape[1], k.shape[1], q.shape[2], k.shape[2], static_cast<int>(q.shape[3])};
}

// Launches kernel<16>, <32> or <64> (head_dim up to 64, 128, 256) with `tiles` shared tiles of
// [kTile, dim + 1] and `squares` of [kTile, kTile + 1].
template <typename Launch>
void dispatch(const OpLaunch& l, int dim, int tiles, int squares, Launch&& launch) {
  const size_t bytes = sizeof(float) * (static_cast<size_t>(tiles) * kTile * (dim + 1) +
                                        static_cast<size_t>(squares) * kTile * (kTile + 1));
  auto go = [&](auto chunks) { launch(chunks, bytes); };
  if (dim <= 64)
    go(std::integral_constant<int, 16>{});
  else if (dim <= 128)
    go(std::integral_constant<int, 32>{});
  else
    go(std::integral_constant<int, 64>{});
  l.check_launch("an attention kernel");
}

template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  H2_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

unsigned tiles_of(int64_t seq) {
  return static_cast<unsigned>((seq + kTile - 1) / kTile);
}

}  // namespace

H2_Status op_attention(H2_Stream* stream, const H2_AttentionArgs* args) {
  return run_op("attention", stream, args, [&](OpLaunch& l) {
    const Shape g = shape_of(args->q, args->k);
    const int64_t batch = args->q.shape[0];
    if (batch == 0 || g.heads == 0 || g.seq_q == 0 || g.dim == 0) return;
    const View q = make_view(args->q), k = make_view(args->k), v = make_view(args->v);
    const View o = make_view(args->o), lse = make_view(args->lse);
    const float scale = static_cast<float>(args->scale);
    const bool causal = args->causal != 0;
    const dim3 grid(tiles_of(g.seq_q), static_cast<unsigned>(batch * g.heads));
    dispatch(l, g.dim, 3, 1, [&](auto chunks, size_t bytes) {
      auto kernel = attention_forward_kernel<decltype(chunks)::value>;
      allow_shared(kernel, bytes);
      kernel<<<grid, kAttentionThreads, bytes, l.cuda>>>(q, k, v, o, lse, g, scale, causal);
    });
  });
}

H2_Status op_attention_backward(H2_Stream* stream, const H2_AttentionBackwardArgs* args) {
  return run_op("attention_backward", stream, args, [&](OpLaunch& l) {
    const Shape g = shape_of(args->q, args->k);
    const int64_t batch = args->q.shape[0];
    const View q = make_view(args->q), k = make_view(args->k), v = make_view(args->v), o = make_view(args->o);
    const View lse = make_view(args->lse), dout = make_view(args->dout);
    const View dq = make_view(args->dq), dk = make_view(args->dk), dv = make_view(args->dv);
    const float scale = static_cast<float>(args->scale);
    const bool causal = args->causal != 0;
    if (batch == 0 || g.dim == 0) return;
    if (g.seq_q == 0 || g.heads == 0) {  // no query reads any key
      launch_map(l, numel(args->dk), [=] __device__(int64_t e) { store(dk, offset_of(dk, e), 0.0f); });
      launch_map(l, numel(args->dv), [=] __device__(int64_t e) { store(dv, offset_of(dv, e), 0.0f); });
      return;
    }
    // delta[row] = dout[row] . o[row], the softmax backward's row term.
    const int64_t rows = batch * g.heads * g.seq_q;
    Scratch delta(l, sizeof(float) * static_cast<size_t>(rows));
    float* d = delta.as<float>();
    const Shape shape = g;
    launch_map(l, rows, [=] __device__(int64_t r) {
      const int64_t i = r % shape.seq_q, h = r / shape.seq_q % shape.heads, b = r / shape.seq_q / shape.heads;
      float sum = 0;
      for (int e = 0; e < shape.dim; ++e) sum += load(dout, at(dout, b, h, i, e)) * load(o, at(o, b, h, i, e));
      d[r] = sum;
    });
    if (g.seq_k > 0) {
      const dim3 key_grid(tiles_of(g.seq_k), static_cast<unsigned>(batch * g.kv_heads));
      dispatch(l, g.dim, 4, 2, [&](auto chunks, size_t bytes) {
        auto kernel = attention_dkdv_kernel<decltype(chunks)::value>;
        allow_shared(kernel, bytes);
        kernel<<<key_grid, kAttentionThreads, bytes, l.cuda>>>(q, k, v, dout, lse, d, dk, dv, g, scale, causal);
      });
    }
    const dim3 query_grid(tiles_of(g.seq_q), static_cast<unsigned>(batch * g.heads));
    dispatch(l, g.dim, 4, 1, [&](auto chunks, size_t bytes) {
      auto kernel = attention_dq_kernel<decltype(chunks)::value>;
      allow_shared(kernel, bytes);
      kernel<<<query_grid, kAttentionThreads, bytes, l.cuda>>>(q, k, v, dout, lse, d, dq, g, scale, causal);
    });
  });
}

}  // namespace h2::cuda
