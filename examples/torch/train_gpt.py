#!/usr/bin/python3
"""A plain PyTorch GPT trained on bytes, the model and data of `h2 train`.

Nothing in the model or the loop knows about H2: moving it onto an H2 device is the device string.

    python3 examples/torch/train_gpt.py --device cpu             # PyTorch on the CPU
    python3 examples/torch/train_gpt.py --device privateuseone   # H2 (import h2torch first: --h2)

With --device privateuseone the script imports h2torch, which makes H2 PyTorch's `privateuseone`
device (H2_TORCH_DEVICES says which H2 device that is). The model is the one of examples/models/*.json
(pre-norm blocks of causal self-attention with rotary positions and a GELU MLP, LayerNorm, no
biases in the linear layers), the data the byte corpus `h2 train` reads by default
(/usr/share/common-licenses, sample i of the run starts at splitmix64(splitmix64(seed) ^ i)).
Prints one line per step and, with --json, the losses as JSON.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class ByteCorpus:
    """Every regular file of a directory, concatenated in name order, as training bytes."""

    def __init__(self, directory="/usr/share/common-licenses"):
        names = sorted(os.listdir(directory))
        paths = [os.path.join(directory, n) for n in names]
        paths = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
        self.bytes = b"".join(open(p, "rb").read() for p in paths)

    def batch(self, first, size, seq_len, seed):
        """Samples first .. first + size - 1: inputs and next-byte targets, [size, seq_len] each."""
        window = seq_len + 1
        rows = []
        for i in range(first, first + size):
            start = splitmix64(splitmix64(seed) ^ i) % (len(self.bytes) - window + 1)
            rows.append(list(self.bytes[start:start + window]))
        data = torch.tensor(rows, dtype=torch.long)
        return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def rotary_tables(seq_len, head_dim, base=10000.0):
    """cos and sin of position * base^(-2i / head_dim), [seq_len, head_dim / 2]."""
    inverse = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * inverse[None, :]
    return angles.cos().float(), angles.sin().float()


def rotate(x, cos, sin):
    """Rotary positions on x [B, T, heads, D]: the pairs (i, i + D/2) turned by the position's angle."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.w_qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.w_o = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = nn.LayerNorm(hidden)
        self.w_up = nn.Linear(hidden, ffn, bias=False)
        self.w_down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin, future):
        B, T, C = x.shape
        D = C // self.heads
        q, k, v = self.w_qkv(self.norm1(x)).split(C, dim=-1)
        q = rotate(q.view(B, T, self.heads, D), cos, sin).transpose(1, 2)  # [B, heads, T, D]
        k = rotate(k.view(B, T, self.heads, D), cos, sin).transpose(1, 2)
        v = v.view(B, T, self.heads, D).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        scores = scores.masked_fill(future, float("-inf"))
        attention = F.softmax(scores, dim=-1) @ v
        x = x + self.w_o(attention.transpose(1, 2).reshape(B, T, C))
        return x + self.w_down(F.gelu(self.w_up(self.norm2(x))))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, vocab, seq_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        cos, sin = rotary_tables(seq_len, hidden // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("future", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))
        # GPT-2's initialisation: std 0.02, the residual projections scaled by 1/sqrt(2 * layers).
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("w_o.weight", "w_down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.embedding(tokens)
        cos, sin, future = self.cos[:T], self.sin[:T], self.future[:T, :T]
        for block in self.blocks:
            x = block(x, cos, sin, future)
        logits = self.lm_head(self.final_norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, or privateuseone[:N] for H2 (default: cpu)")
    parser.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "..", "models", "gpt-tiny.json"),
                        help="a model description (examples/models/*.json); gpt-tiny by default")
    parser.add_argument("--layers", type=int, help="override the model's layers")
    parser.add_argument("--hidden", type=int, help="override the model's hidden size (and ffn = 4 * hidden)")
    parser.add_argument("--seq-len", type=int, help="override the model's sequence length")
    parser.add_argument("--batch", type=int, help="samples per step (default: the model's global_batch)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--json", help="write the losses and step times here")
    args = parser.parse_args()

    with open(args.model) as f:
        m = json.load(f)
    if m.get("dtype", "f32") != "f32" or m.get("mlp", "gelu") != "gelu" or m.get("kv_heads", m["heads"]) != m["heads"]:
        sys.exit(f"train_gpt.py: {args.model}: this example trains f32 GELU models without grouped-query attention")
    layers = args.layers or m["layers"]
    hidden = args.hidden or m["hidden"]
    ffn = 4 * hidden if args.hidden else m["ffn"]
    seq_len = args.seq_len or m["seq_len"]
    batch = args.batch or m["global_batch"]

    if args.device.startswith("privateuseone"):
        import h2torch  # noqa: F401  (registers H2 as PyTorch's privateuseone device)
    device = torch.device(args.device)

    torch.manual_seed(args.seed)
    model = GPT(layers, hidden, m["heads"], ffn, m["vocab"], seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    corpus = ByteCorpus()
    print(f"train_gpt.py: {sum(p.numel() for p in model.parameters())} parameters, {layers} layers, hidden {hidden}, "
          f"batch {batch} x {seq_len} bytes, on {device}", flush=True)

    losses, seconds = [], []
    for step in range(args.steps):
        start = time.perf_counter()
        tokens, targets = corpus.batch(step * batch, batch, seq_len, args.seed)
        loss = model(tokens.to(device), targets.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - start)
        print(f"step {step + 1:4d}/{args.steps}  loss {losses[-1]:.6f}  {seconds[-1] * 1e3:8.1f} ms", flush=True)

    result = {"device": str(device), "losses": losses, "step_seconds": seconds}
    if device.type == "privateuseone":
        import h2torch
        result["h2_device"] = h2torch.device_label(device.index or 0)
        result["fallback_counts"] = h2torch.fallback_counts()
        print(f"operators run on the CPU (fallback): {sum(result['fallback_counts'].values())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
