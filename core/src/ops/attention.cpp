#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;

namespace {

// The shared shape rules of the forward and the backward.
void require_attention_shapes(const OpCheck& check, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse) {
  check.require_rank(q, "q", 4);
  check.require_rank(k, "k", 4);
  check.require_same_shape(v, "v", k, "k");
  if (!(k.size(0) == q.size(0))) check.fail(OpCheck::is("q", q) + " but " + OpCheck::is("k", k) + ": batches differ");
  if (!(k.size(3) == q.size(3))) check.fail(OpCheck::is("q", q) + " but " + OpCheck::is("k", k) + ": head dims differ");
  if (!(k.size(1) > 0 && q.size(1) % k.size(1) == 0))
    check.fail(OpCheck::is("q", q) + " but " + OpCheck::is("k", k) + ": query heads must be a multiple of kv heads");
  check.require_same_shape(o, "o", q, "q");
  check.require_shape(lse, "lse", {q.size(0), q.size(1), q.size(2)}, "[batch, heads, seq_q]");
  check.require_statistic(lse, "lse");
  check.require_same_dtype(q, "q", k, "k");
  check.require_same_dtype(q, "q", v, "v");
  check.require_same_dtype(q, "q", o, "o");
}

}  // namespace

void attention(Stream& stream, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
               double scale, bool causal) {
  OpCheck check(stream, H2_OP_ATTENTION);
  check.input(q, "q");
  check.input(k, "k");
  check.input(v, "v");
  check.output(o, "o");
  check.output(lse, "lse");
  require_attention_shapes(check, q, k, v, o, lse);
  auto args = make_args<H2_AttentionArgs>();
  args.q = q.descriptor();
  args.k = k.descriptor();
  args.v = v.descriptor();
  args.o = o.descriptor();
  args.lse = lse.descriptor();
  args.scale = scale;
  args.causal = causal;
  check.call(op_slot(check, check.ops().attention), args);
}

void attention_backward(Stream& stream, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        double scale, bool causal) {
  OpCheck check(stream, H2_OP_ATTENTION_BACKWARD);
  check.input(q, "q");
  check.input(k, "k");
  check.input(v, "v");
  check.input(o, "o");
  check.input(lse, "lse");
  check.input(dout, "dout");
  check.output(dq, "dq");
  check.output(dk, "dk");
  check.output(dv, "dv");
  require_attention_shapes(check, q, k, v, o, lse);
  check.require_same_shape(dout, "dout", q, "q");
  check.require_same_shape(dq, "dq", q, "q");
  check.require_same_shape(dk, "dk", k, "k");
  check.require_same_shape(dv, "dv", v, "v");
  auto args = make_args<H2_AttentionBackwardArgs>();
  args.q = q.descriptor();
  args.k = k.descriptor();
  args.v = v.descriptor();
  args.o = o.descriptor();
  args.lse = lse.descriptor();
  args.dout = dout.descriptor();
  args.dq = dq.descriptor();
  args.dk = dk.descriptor();
  args.dv = dv.descriptor();
  args.scale = scale;
  args.causal = causal;
  check.call(op_slot(check, check.ops().attention_backward), args);
}

}  // namespace h2::ops
