// gemm cases: the projections of a transformer block, batched attention products, a long
// reduction, accumulation into f32, unaligned and strided operands, empty and size-1 shapes.
#include "cases.hpp"

namespace h2::conformance {

namespace {

Case gemm_case(std::string name, DType dtype, Shape a, Shape b, Shape c, ops::GemmOptions options, bool bias,
               Layout a_layout = Layout::contiguous, Layout b_layout = Layout::contiguous) {
  const int64_t k = options.transpose_a ? a[a.size() - 2] : a.back();
  Case x{.op = "gemm", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "A", .shape = a, .layout = a_layout},
               {.name = "B", .shape = b, .layout = b_layout},
               {.name = "C", .shape = c, .role = options.beta != 0 ? Role::inout : Role::output}};
  if (bias) x.tensors.push_back({.name = "bias", .shape = {c.back()}});
  x.run = [options, bias](Stream& s, const std::vector<Tensor>& t) {
    ops::gemm(s, t[0], t[1], t[2], options, bias ? t[3] : Tensor());
  };
  x.n = k + 2;
  return x;
}

}  // namespace

void add_linear_cases(CaseList& list, const Sizes& s, DType dtype) {
  const int64_t t = s.tokens(), h = s.hidden, f = s.ffn, hd = s.head_dim();
  auto& cases = list.cases;
  // x W^T with the weight stored [out, in], as every linear layer.
  cases.push_back(gemm_case("qkv projection " + shape_name({t, h}) + " x " + shape_name({3 * h, h}) + "^T", dtype,
                            {t, h}, {3 * h, h}, {t, 3 * h}, {.transpose_b = true}, false));
  cases.push_back(gemm_case("mlp up with bias " + shape_name({t, h}) + " x " + shape_name({f, h}) + "^T", dtype, {t, h},
                            {f, h}, {t, f}, {.transpose_b = true}, true));
  // Weight gradient: dW = dY^T X.
  cases.push_back(gemm_case("weight gradient " + shape_name({t, f}) + "^T x " + shape_name({t, h}), dtype, {t, f},
                            {t, h}, {f, h}, {.transpose_a = true}, false));
  // Attention scores per head: [heads, seq, hd] x [heads, seq, hd]^T.
  cases.push_back(gemm_case("batched scores " + shape_name({s.heads, s.seq, hd}), dtype, {s.heads, s.seq, hd},
                            {s.heads, s.seq, hd}, {s.heads, s.seq, s.seq}, {.transpose_b = true, .alpha = 0.125},
                            false));
  // One matrix shared by every batch.
  cases.push_back(gemm_case("broadcast B " + shape_name({s.batch, s.seq, h}), dtype, {s.batch, s.seq, h}, {h, h},
                            {s.batch, s.seq, h}, {}, false));
  // The long reduction of the issue, K = 16384.
  cases.push_back(gemm_case("long reduction K=" + std::to_string(s.long_k), dtype, {4, s.long_k}, {s.long_k, 3}, {4, 3},
                            {}, false));
  // Gradient accumulation: C (f32) += A B, in any input dtype.
  {
    Case acc = gemm_case("accumulate into f32 C, beta 1", dtype, {t, h}, {h, h}, {t, h}, {.beta = 1}, false);
    acc.tensors[2].kind = Kind::master;
    cases.push_back(acc);
  }
  cases.push_back(gemm_case("alpha -0.5 beta 2", dtype, {16, 24}, {24, 8}, {16, 8}, {.alpha = -0.5, .beta = 2}, false));
  // Operands that are not plain contiguous memory.
  cases.push_back(gemm_case("A unaligned, B strided", dtype, {17, 33}, {33, 9}, {17, 9}, {}, false, Layout::offset,
                            Layout::strided));
  cases.push_back(gemm_case("A and B stored transposed", dtype, {12, 20}, {20, 7}, {12, 7}, {}, false,
                            Layout::transposed, Layout::transposed));
  // A batch of 3 into an unaligned C with a guard after it, A shared by every batch: a device that
  // runs past the last batch writes into the guard.
  {
    Case batched = gemm_case("batched, A shared, C unaligned", dtype, {1, 5, 6}, {3, 6, 4}, {3, 5, 4}, {}, false);
    batched.tensors[2].layout = Layout::offset;
    cases.push_back(batched);
  }
  // Edge shapes.
  cases.push_back(gemm_case("empty m", dtype, {0, 8}, {8, 5}, {0, 5}, {}, false));
  cases.push_back(gemm_case("empty k gives the bias", dtype, {3, 0}, {0, 5}, {3, 5}, {}, true));
  cases.push_back(gemm_case("size-1 dimensions", dtype, {1, h}, {h, 1}, {1, 1}, {}, false));
}

}  // namespace h2::conformance
