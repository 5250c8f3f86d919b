#!/usr/bin/python3
"""DiTorch's operators against CPU PyTorch, forward and backward, on the device H2_TORCH_DEVICES names.

Every case runs the operator on random inputs on the CPU (in float32, from the same rounded values
for 16-bit dtypes) and on privateuseone, and compares the outputs and the gradients of every
floating-point input for a random upstream gradient. float32 within rtol 1e-4 / atol 1e-5; float16
and bfloat16 within their rounding, where the plugin supports them (a dtype the plugin's capability
lacks is skipped, naming it). Meson runs this with H2_TORCH_FALLBACK=error, so an operator that
silently ran on the CPU fails the test.
"""

import os
import unittest

import torch
import torch.nn.functional as F

import h2torch

H2 = torch.device("privateuseone", 0)
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (4e-2, 4e-2)}
DTYPES = [getattr(torch, name) for name in os.environ.get("H2_TORCH_TEST_DTYPES", "float32,float16,bfloat16").split(",")]


def rand(*shape, low=-1.0, high=1.0):
    return torch.rand(*shape) * (high - low) + low


def positive(*shape):
    return rand(*shape, low=0.5, high=2.0)


def indices(high, *shape):
    return torch.randint(0, high, shape)


# (name, function, inputs, options): inputs are CPU tensors (floating ones are cast to the dtype under
# test); options: grad=False for no backward, dtypes=[...] to restrict.
CASES = [
    ("add", lambda a, b: a + b, lambda: [rand(4, 5), rand(1, 5)], {}),
    ("add alpha", lambda a, b: torch.add(a, b, alpha=2.5), lambda: [rand(3, 4), rand(3, 4)], {}),
    ("sub scalar left", lambda a: 2.0 - a, lambda: [rand(3, 4)], {}),
    ("sub alpha", lambda a, b: torch.sub(a, b, alpha=0.5), lambda: [rand(3, 1), rand(1, 4)], {}),
    ("mul", lambda a, b: a * b, lambda: [rand(2, 3, 4), rand(3, 1)], {}),
    ("mul scalar", lambda a: a * 3.0, lambda: [rand(5)], {}),
    ("div", lambda a, b: a / b, lambda: [rand(4, 4), positive(4, 4)], {}),
    ("div scalar", lambda a: a / 7.0, lambda: [rand(6)], {}),
    ("maximum", torch.maximum, lambda: [rand(3, 4), rand(3, 4)], {}),
    ("minimum", torch.minimum, lambda: [rand(3, 4), rand(4)], {}),
    ("pow scalar", lambda a: a ** 2, lambda: [rand(3, 4)], {}),
    ("pow tensor", torch.pow, lambda: [positive(3, 4), rand(3, 4)], {}),
    ("clamp", lambda a: a.clamp(-0.5, 0.25), lambda: [rand(4, 5)], {}),
    ("clamp min", lambda a: a.clamp(min=0.0), lambda: [rand(4, 5)], {}),
    ("exp", torch.exp, lambda: [rand(3, 4)], {}),
    ("log", torch.log, lambda: [positive(3, 4)], {}),
    ("sqrt", torch.sqrt, lambda: [positive(3, 4)], {}),
    ("rsqrt", torch.rsqrt, lambda: [positive(3, 4)], {}),
    ("neg", torch.neg, lambda: [rand(3, 4)], {}),
    ("reciprocal", torch.reciprocal, lambda: [positive(3, 4)], {}),
    ("abs", torch.abs, lambda: [rand(3, 4)], {}),
    ("addcmul", lambda s, a, b: torch.addcmul(s, a, b, value=0.3), lambda: [rand(3, 4), rand(3, 4), rand(1, 4)], {}),
    ("addcdiv", lambda s, a, b: torch.addcdiv(s, a, b, value=-0.2), lambda: [rand(3, 4), rand(3, 4), positive(3, 4)], {}),
    ("where", lambda c, a, b: torch.where(c, a, b), lambda: [rand(3, 4) > 0, rand(3, 4), rand(1, 4)], {}),
    ("masked_fill", lambda a, m: a.masked_fill(m, -3.0), lambda: [rand(2, 3, 4), rand(3, 4) > 0], {}),
    ("masked_fill -inf then softmax", lambda a, m: F.softmax(a.masked_fill(m, float("-inf")), -1),
     lambda: [rand(4, 4), torch.ones(4, 4, dtype=torch.bool).triu(1)], {}),
    ("mm", torch.mm, lambda: [rand(5, 7), rand(7, 3)], {}),
    ("mm transposed", lambda a, b: a.t() @ b.t(), lambda: [rand(7, 5), rand(3, 7)], {}),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), lambda: [rand(3), rand(5, 7), rand(7, 3)], {}),
    ("linear 3-D with bias", F.linear, lambda: [rand(2, 5, 8), rand(6, 8), rand(6)], {}),
    ("bmm", torch.bmm, lambda: [rand(3, 4, 5), rand(3, 5, 2)], {}),
    ("matmul 4-D", lambda a, b: a @ b.transpose(-2, -1), lambda: [rand(2, 3, 4, 8), rand(2, 3, 6, 8)], {}),
    ("softmax last", lambda a: F.softmax(a, -1), lambda: [rand(3, 4, 9) * 4], {}),
    ("softmax dim 1", lambda a: F.softmax(a, 1), lambda: [rand(3, 4, 9) * 4], {}),
    ("log_softmax last", lambda a: F.log_softmax(a, -1), lambda: [rand(5, 11) * 4], {}),
    ("log_softmax dim 0", lambda a: F.log_softmax(a, 0), lambda: [rand(5, 11) * 4], {}),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (16,), w, b), lambda: [rand(2, 3, 16), rand(16), rand(16)], {}),
    ("layer_norm 2-D shape, no affine", lambda x: F.layer_norm(x, (3, 8)), lambda: [rand(4, 3, 8)], {}),
    ("gelu", F.gelu, lambda: [rand(4, 8) * 3], {}),
    ("gelu tanh", lambda a: F.gelu(a, approximate="tanh"), lambda: [rand(4, 8) * 3], {}),
    ("silu", F.silu, lambda: [rand(4, 8) * 3], {}),
    ("embedding", F.embedding, lambda: [indices(10, 3, 5), rand(10, 6)], {}),
    ("embedding padding_idx", lambda i, w: F.embedding(i, w, padding_idx=2), lambda: [indices(6, 4, 4), rand(6, 3)], {}),
    ("cross_entropy", F.cross_entropy, lambda: [rand(8, 13) * 3, indices(13, 8)], {}),
    ("cross_entropy ignore_index sum", lambda x, t: F.cross_entropy(x, t, reduction="sum"),
     lambda: [rand(8, 13) * 3, indices(13, 8).index_fill(0, torch.tensor([1, 4]), -100)], {}),
    ("cross_entropy weights none", lambda x, t, w: F.cross_entropy(x, t, w, reduction="none"),
     lambda: [rand(8, 13) * 3, indices(13, 8), positive(13)], {"constant": [2]}),
    ("nll_loss 1-D", lambda x, t: F.nll_loss(F.log_softmax(x, 0), t), lambda: [rand(7), torch.tensor(3)], {}),
    ("sum dims", lambda a: a.sum((0, 2)), lambda: [rand(3, 4, 5)], {}),
    ("sum all", lambda a: a.sum(), lambda: [rand(3, 4, 5)], {}),
    ("sum keepdim", lambda a: a.sum(-1, keepdim=True), lambda: [rand(3, 4, 5)], {}),
    ("mean", lambda a: a.mean(1), lambda: [rand(3, 4, 5)], {}),
    ("amax", lambda a: a.amax(-1), lambda: [rand(3, 7)], {}),
    # max over a dimension: its backward scatters (assignment), which runs on the CPU (see indexing.cpp).
    ("max dim", lambda a: a.max(1).values, lambda: [rand(3, 7)], {"grad": False}),
    ("max dim indices", lambda a: a.max(1).indices, lambda: [rand(3, 7)], {"grad": False}),
    ("index_add", lambda a, i, s: a.index_add(0, i, s, alpha=2.0), lambda: [rand(5, 3), indices(5, 4), rand(4, 3)], {}),
    ("comparisons", lambda a, b: torch.stack([a == b, a != b, a < b, a <= b, a > b, a >= b, a > 0.5, a.isnan()]),
     lambda: [torch.tensor([1.0, 2.0, float("inf"), float("nan"), -1.0, 0.0]),
              torch.tensor([1.0, 3.0, float("inf"), 1.0, -2.0, -0.0])], {"grad": False}),
    ("logical", lambda a, b: torch.stack([a.logical_and(b), a.logical_or(b), a.logical_not()]),
     lambda: [rand(3, 4) > 0, rand(3, 4) > 0], {"grad": False}),
    ("sign", torch.sign, lambda: [torch.tensor([-2.0, 0.0, 3.5, float("-inf")])], {"grad": False}),
    ("max all", lambda a: a.max(), lambda: [rand(3, 7)], {}),
    ("min all", lambda a: a.min(), lambda: [rand(3, 7)], {}),
    ("amin", lambda a: a.amin(0), lambda: [rand(3, 7)], {}),
    ("min dim", lambda a: a.min(1).values, lambda: [rand(3, 7)], {"grad": False}),
    ("min dim indices", lambda a: a.min(1).indices, lambda: [rand(3, 7)], {"grad": False}),
    ("index_select", lambda a, i: a.index_select(1, i), lambda: [rand(3, 6, 2), indices(6, 5)], {}),
    ("gather", lambda a, i: a.gather(1, i), lambda: [rand(4, 6), indices(6, 4, 3)], {}),
    ("scatter_add", lambda a, i, s: a.scatter_add(1, i, s), lambda: [rand(4, 6), indices(6, 4, 3), rand(4, 3)], {}),
    ("cat", lambda a, b: torch.cat([a, b], 1), lambda: [rand(2, 3, 4), rand(2, 5, 4)], {}),
    ("stack", lambda a, b: torch.stack([a, b], 0), lambda: [rand(3, 4), rand(3, 4)], {}),
    ("rotary by halves", lambda x, c, s: torch.cat([x[..., :4] * c - x[..., 4:] * s, x[..., 4:] * c + x[..., :4] * s], -1),
     lambda: [rand(2, 5, 3, 8), rand(5, 1, 4), rand(5, 1, 4)], {}),
    ("in-place arithmetic", lambda a, b: a.clone().add_(b, alpha=2).mul_(b).div_(2.0).sub_(b).pow_(2).add_(0.1).sqrt_(),
     lambda: [rand(3, 4), rand(3, 4)], {}),
    ("in-place unary", lambda a: a.clone().neg_().abs_().add_(0.5).reciprocal_(), lambda: [rand(3, 4)], {}),
    ("in-place clamp and exp", lambda a: a.clone().clamp_(max=0.5).exp_(), lambda: [rand(3, 4)], {}),
    ("in-place addcmul and addcdiv", lambda a, b: a.clone().addcmul_(a, b, value=0.5).addcdiv_(a, b.abs() + 1),
     lambda: [rand(3, 4), rand(3, 4)], {}),
    ("in-place activations and fills", lambda a: F.silu(F.gelu(a.clone().fill_(torch.tensor(0.5)) + a), inplace=True) * 1,
     lambda: [rand(3, 4)], {}),
    ("transpose reshape", lambda a: a.transpose(1, 2).reshape(2, 12) * 2, lambda: [rand(2, 3, 4)], {}),
]


class Operators(unittest.TestCase):
    def run_case(self, fn, make, dtype, grad=True, constant=()):
        torch.manual_seed(0)
        inputs = make()
        rounded = [x.to(dtype).float() if x.is_floating_point() else x for x in inputs]
        wants_grad = [grad and x.is_floating_point() and i not in constant for i, x in enumerate(rounded)]
        cpu = [x.clone().requires_grad_(g) for x, g in zip(rounded, wants_grad)]
        h2 = [(x.to(dtype) if x.is_floating_point() else x).to(H2).requires_grad_(g) for x, g in zip(rounded, wants_grad)]
        expected = fn(*cpu)
        try:
            result = fn(*h2)
        except RuntimeError as e:
            if "for this operator" in str(e) and dtype != torch.float32:
                self.skipTest(f"the plugin does not support {dtype}: {e}")
            raise
        self.assertEqual(result.device, H2)
        rtol, atol = TOLERANCE[dtype]
        if expected.is_floating_point():
            torch.testing.assert_close(result.cpu().float(), expected.detach(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            self.assertTrue(torch.equal(result.cpu(), expected), f"{result.cpu()} != {expected}")
        if not grad or not expected.requires_grad:
            return
        upstream = torch.randn(expected.shape).to(dtype).float()
        finite = torch.isfinite(expected.detach())
        (expected.masked_fill(~finite, 0) * upstream).sum().backward()
        result.backward(upstream.masked_fill(~finite, 0).to(dtype).to(H2))
        for i, (c, h) in enumerate(zip(cpu, h2)):
            if c.requires_grad:
                self.assertIsNotNone(h.grad, f"input {i} has no gradient")
                torch.testing.assert_close(h.grad.cpu().float(), c.grad, rtol=rtol * 10, atol=atol * 10,
                                           msg=lambda m: f"gradient of input {i}: {m}")

    def test_operators_forward_and_backward_match_cpu_pytorch(self):
        for name, fn, make, options in CASES:
            for dtype in options.get("dtypes", DTYPES):
                with self.subTest(op=name, dtype=dtype):
                    self.run_case(fn, make, dtype, options.get("grad", True), options.get("constant", ()))

    def test_factories_and_item(self):
        self.assertTrue(torch.equal(torch.ones(2, 3, device=H2).cpu(), torch.ones(2, 3)))
        self.assertTrue(torch.equal(torch.zeros(4, device=H2).cpu(), torch.zeros(4)))
        self.assertTrue(torch.equal(torch.full((2, 2), 1.5, device=H2).cpu(), torch.full((2, 2), 1.5)))
        self.assertTrue(torch.equal(torch.arange(7, device=H2).cpu(), torch.arange(7)))
        self.assertTrue(torch.allclose(torch.arange(1.0, 2.0, 0.25, device=H2).cpu(), torch.arange(1.0, 2.0, 0.25)))
        self.assertEqual(torch.tensor([2.5]).to(H2).item(), 2.5)
        x = torch.randn(3, 4)
        self.assertTrue(torch.equal(x.to(H2).to(torch.float16).cpu(), x.to(torch.float16)))

    def test_dropout_keeps_the_expected_fraction_and_its_gradient_is_the_mask(self):
        torch.manual_seed(1)
        x = torch.ones(64, 64, device=H2, requires_grad=True)
        y = F.dropout(x, p=0.25, training=True)
        kept = (y.cpu() != 0).float()
        self.assertAlmostEqual(kept.mean().item(), 0.75, delta=0.03)
        torch.testing.assert_close(y.cpu(), kept / 0.75)
        y.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), kept / 0.75)
        torch.manual_seed(1)
        again = F.dropout(torch.ones(64, 64, device=H2), p=0.25, training=True)
        self.assertTrue(torch.equal(again.cpu(), y.detach().cpu()), "torch.manual_seed does not reseed the device")
        self.assertTrue(torch.equal(F.dropout(x, p=0.25, training=False).cpu(), x.detach().cpu()))

    def test_native_dropout_and_its_backward(self):
        torch.manual_seed(4)
        x = torch.randn(32, 32, device=H2, requires_grad=True)
        y, mask = torch.native_dropout(x, 0.5, True)
        kept = mask.cpu()
        self.assertEqual(kept.dtype, torch.bool)
        self.assertAlmostEqual(kept.float().mean().item(), 0.5, delta=0.05)
        torch.testing.assert_close(y.detach().cpu(), x.detach().cpu() * kept / 0.5)
        y.backward(torch.ones_like(y))
        torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.5)

    def test_uniform_and_normal_fill_on_the_device(self):
        torch.manual_seed(5)
        u = torch.empty(20000, device=H2).uniform_(-2.0, 3.0).cpu()
        self.assertGreaterEqual(u.min().item(), -2.0)
        self.assertLess(u.max().item(), 3.0)
        self.assertAlmostEqual(u.mean().item(), 0.5, delta=0.05)
        n = torch.empty(20000, device=H2).normal_(1.0, 2.0).cpu()
        self.assertAlmostEqual(n.mean().item(), 1.0, delta=0.1)
        self.assertAlmostEqual(n.std().item(), 2.0, delta=0.1)

    def test_out_arguments_and_resize(self):
        a, b = torch.randn(3, 4), torch.randn(3, 4)
        out = torch.empty(0, device=H2)
        torch.add(a.to(H2), b.to(H2), out=out)
        torch.testing.assert_close(out.cpu(), a + b)
        grown = torch.arange(4.0).to(H2)
        alias = grown.view(4)
        grown.resize_(2, 5)
        self.assertEqual(grown.shape, (2, 5))
        torch.testing.assert_close(grown.cpu().flatten()[:4], torch.arange(4.0))
        grown.fill_(7.0)  # the storage grew in place: a view of it sees the new memory
        torch.testing.assert_close(alias.cpu(), torch.full((4,), 7.0))

    def test_adamw_steps_match_cpu_pytorch(self):
        torch.manual_seed(2)
        weights = [torch.randn(5, 3), torch.randn(3)]
        grads = [[torch.randn_like(w) for w in weights] for _ in range(3)]
        results = []
        for device in ("cpu", H2):
            params = [torch.nn.Parameter(w.clone().to(device)) for w in weights]
            optimizer = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)
            for step in grads:
                for p, g in zip(params, step):
                    p.grad = g.to(device)
                optimizer.step()
            results.append([p.detach().cpu() for p in params])
        for cpu, h2 in zip(*results):
            torch.testing.assert_close(h2, cpu, rtol=1e-5, atol=1e-6)

    def test_autograd_through_a_small_model(self):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                    torch.nn.Linear(16, 4))
        x, target = torch.randn(10, 6), torch.randint(0, 4, (10,))
        copy = torch.nn.Sequential(*[m for m in model]).to(H2) if False else None
        losses = {}
        grads = {}
        for device in ("cpu", H2):
            torch.manual_seed(3)
            m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                    torch.nn.Linear(16, 4)).to(device)
            loss = F.cross_entropy(m(x.to(device)), target.to(device))
            loss.backward()
            losses[str(device)] = loss.item()
            grads[str(device)] = [p.grad.cpu() for p in m.parameters()]
        self.assertAlmostEqual(losses[str(H2)], losses["cpu"], places=5)
        for h2, cpu in zip(grads[str(H2)], grads["cpu"]):
            torch.testing.assert_close(h2, cpu, rtol=1e-4, atol=1e-5)

    def test_mixing_devices_in_one_operator_is_named(self):
        with self.assertRaisesRegex(RuntimeError, "expected all tensors on one H2 device, found cpu"):
            torch.ones(2, device=H2) + torch.ones(2)

    def test_a_device_that_does_not_exist_is_named(self):
        with self.assertRaisesRegex(IndexError, "privateuseone:7 does not exist: H2 has 1 device"):
            torch.ones(2, device=torch.device("privateuseone", 7))
        with self.assertRaisesRegex(IndexError, "privateuseone:7 does not exist"):
            h2torch.device(7)

    def test_a_dtype_the_plugin_does_not_support_names_its_capability(self):
        # float64 products: cpu-reference computes them; a plugin without them says which it has.
        a = torch.randn(3, 3, dtype=torch.float64)
        try:
            product = (a.to(H2) @ a.to(H2)).cpu()
        except RuntimeError as e:
            self.assertRegex(str(e), r"plugin \S+ supports .* for this operator")
            return
        torch.testing.assert_close(product, a @ a)

    def test_the_python_api(self):
        self.assertEqual(h2torch.device_count(), 1)
        self.assertEqual(h2torch.device(0), H2)
        self.assertEqual(h2torch.device_label(0), os.environ["H2_TORCH_DEVICES"])
        torch.ones(1000, device=H2)
        h2torch.synchronize()
        stats = h2torch.memory_stats(0)
        self.assertGreater(stats["allocations"], 0)
        self.assertIn("peak_reserved_bytes", stats)
        self.assertIsInstance(h2torch.fallback_counts(), dict)


if __name__ == "__main__":
    unittest.main()
