#!/usr/bin/env python3
"""Prints the CUDA plugin's ratios against its peers, measured in one run on one GPU:
gemm vs cuBLAS (goal >= 0.95) and attention forward+backward vs PyTorch SDPA (goal >= 1.0).
Usage: compare.py PLUGIN.json PEER.json [OUT.json]"""
import json
import sys


def main():
    plugin, peer = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    rows = []
    print(f"device: {plugin['device']} (PyTorch {peer['torch']})")
    print(f"{'benchmark':<44} {'H2 ms':>9} {'peer ms':>9} {'ratio':>7}  goal")
    for g in plugin["gemm"]:
        name = f"gemm {g['dtype']} {g['m']}x{g['n']}x{g['k']} vs cuBLAS"
        rows.append({"benchmark": name, "h2_ms": g["plugin_ms"], "peer_ms": g["cublas_ms"], "ratio": g["ratio"],
                     "goal": 0.95})
    for a, t in zip(plugin["attention"], peer["attention"]):
        name = f"attention fwd+bwd b{a['batch']} h{a['heads']}/{a['kv_heads']} s{a['seq']} d{a['dim']} {a['dtype']}"
        rows.append({"benchmark": name + " vs SDPA", "h2_ms": a["plugin_step_ms"], "peer_ms": t["torch_step_ms"],
                     "ratio": t["torch_step_ms"] / a["plugin_step_ms"], "goal": 1.0})
    for r in rows:
        met = "met" if r["ratio"] >= r["goal"] else "NOT met"
        print(f"{r['benchmark']:<44} {r['h2_ms']:9.3f} {r['peer_ms']:9.3f} {r['ratio']:6.3f}x  >= {r['goal']} {met}")
    if len(sys.argv) > 3:
        json.dump({"device": plugin["device"], "rows": rows}, open(sys.argv[3], "w"), indent=2)


if __name__ == "__main__":
    main()
