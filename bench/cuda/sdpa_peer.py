#!/usr/bin/env python3
"""PyTorch's peer timings for bench/cuda/cuda_kernels: scaled_dot_product_attention forward and
forward+backward (causal) on the shapes the plugin ran, medians of CUDA-event timings after a warm-up,
the same protocol as the C++ side. Reads the plugin's JSON, writes the peer's."""
import json
import sys

import torch
import torch.nn.functional as F

WARMUP, REPEATS = 3, 20
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def median_ms(work):
    for _ in range(WARMUP):
        work()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def attention_case(case):
    dtype = DTYPES[case["dtype"]]
    b, h, kvh, s, d = (case[k] for k in ("batch", "heads", "kv_heads", "seq", "dim"))
    q = torch.randn(b, h, s, d, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(b, kvh, s, d, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(b, kvh, s, d, device="cuda", dtype=dtype, requires_grad=True)
    dout = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    gqa = {"enable_gqa": True} if kvh != h else {}

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        out.backward(dout)

    return {"torch_forward_ms": median_ms(forward), "torch_step_ms": median_ms(step)}


def main():
    plugin = json.load(open(sys.argv[1]))
    peer = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
            "attention": [attention_case(c) for c in plugin["attention"]]}
    json.dump(peer, open(sys.argv[2], "w"), indent=2)


if __name__ == "__main__":
    main()
