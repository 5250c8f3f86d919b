#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;

void gemm(Stream& stream, const Tensor& a, const Tensor& b, const Tensor& c, const GemmOptions& options,
          const Tensor& bias) {
  OpCheck check(stream, H2_OP_GEMM);
  check.input(a, "A");
  check.input(b, "B");
  if (options.beta != 0) {
    check.inout(c, "C");  // read as well as written
  } else {
    check.output(c, "C");
  }
  check.input(bias, "bias", detail::TensorKind::floating, true);

  if (!(c.rank() == 2 || c.rank() == 3)) check.fail(OpCheck::is("C", c) + " but must be [m, n] or [batch, m, n]");
  for (auto [t, name] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
    if (!((t->rank() == 2 || t->rank() == c.rank()) && t->rank() >= 2))
      check.fail(OpCheck::is(name, *t) + " but C is " + c.describe() +
                 ": ranks must match (or be 2 to share one matrix)");
  check.require_same_dtype(a, "A", b, "B");
  if (!(c.dtype() == a.dtype() || c.dtype() == DType::f32))
    check.fail(OpCheck::is("C", c) + " but must have A's dtype (" + std::string(dtype_name(a.dtype())) + ") or f32");

  const int64_t m = options.transpose_a ? a.size(-1) : a.size(-2);
  const int64_t k = options.transpose_a ? a.size(-2) : a.size(-1);
  const int64_t kb = options.transpose_b ? b.size(-1) : b.size(-2);
  const int64_t n = options.transpose_b ? b.size(-2) : b.size(-1);
  if (k != kb)
    check.fail("A is " + shape_string(a.shape()) + (options.transpose_a ? " (transposed)" : "") + " but B is " +
               shape_string(b.shape()) + (options.transpose_b ? " (transposed)" : "") + ": inner dimensions differ");
  if (c.size(-2) != m || c.size(-1) != n)
    check.fail("C is " + shape_string(c.shape()) + " but op(A) @ op(B) is [" + std::to_string(m) + ", " +
               std::to_string(n) + "]");
  if (c.rank() == 3) {
    for (auto [t, name] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
      if (!(t->rank() == 2 || t->size(0) == c.size(0) || t->size(0) == 1))
        check.fail(OpCheck::is(name, *t) + " but C has batch " + std::to_string(c.size(0)) + ": batches differ");
  }
  if (bias.defined()) {
    check.require_shape(bias, "bias", {n}, "a bias added to each row of C");
    if (!(bias.dtype() == c.dtype())) check.fail(OpCheck::is("bias", bias) + " but must have C's dtype");
  }

  auto args = make_args<H2_GemmArgs>();
  args.a = a.descriptor();
  args.b = b.descriptor();
  args.c = c.descriptor();
  args.bias = bias.descriptor();
  args.transpose_a = options.transpose_a;
  args.transpose_b = options.transpose_b;
  args.alpha = options.alpha;
  args.beta = options.beta;
  check.call(op_slot(check, check.ops().gemm), args);
}

}  // namespace h2::ops
