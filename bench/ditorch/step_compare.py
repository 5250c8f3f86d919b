#!/usr/bin/python3
"""A training step of examples/torch's GPT through DiTorch against `h2 train` of the same model.

On one cpu-reference device (one-device.json), the same model (gpt-tiny: 6 layers, hidden 128, 16 x
128 bytes a step) and the same data: `h2 train` (HeteroPP's hand-written GPT on h2::ops), the Python
example on privateuseone, the C++ example on privateuseone, and the Python example on CPU PyTorch for
context. Step times are medians after the first step. Prints a table, the ratio of the bridge to
`h2 train` (goal: within 1.5x) and the fallback count of the bridge's steps (goal: 0); --json writes
the same for programs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL = os.path.join(ROOT, "examples", "models", "gpt-tiny.json")
EXAMPLE = os.path.join(ROOT, "examples", "torch", "train_gpt.py")


def median_after_first(seconds):
    return statistics.median(seconds[1:])


def run(command, env=None):
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, env={**os.environ, **(env or {})}, check=True, timeout=1200,
                   stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--h2", required=True, help="the h2 tool")
    parser.add_argument("--cluster", required=True, help="a cluster of one cpu-reference device")
    parser.add_argument("--cpp", help="the C++ example (train_gpt_torch), measured too when given")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        run([args.h2, "train", "--cluster", args.cluster, "--model", MODEL, "--steps", str(args.steps),
             "--out", os.path.join(tmp, "h2-train")])
        with open(os.path.join(tmp, "h2-train", "metrics.jsonl")) as f:
            steps = [json.loads(line) for line in f if line.strip()]
        results["h2 train (HeteroPP)"] = {"step_s": median_after_first([s["step_s"] for s in steps])}

        h2_env = {"H2_TORCH_DEVICES": "cpu-reference:0"}
        examples = [("DiTorch, Python example", [sys.executable, EXAMPLE], "privateuseone")]
        if args.cpp:
            examples.append(("DiTorch, C++ example", [args.cpp], "privateuseone"))
        examples.append(("CPU PyTorch, Python example", [sys.executable, EXAMPLE], "cpu"))
        for name, program, device in examples:
            path = os.path.join(tmp, "example.json")
            run([*program, "--model", MODEL, "--steps", str(args.steps), "--device", device, "--json", path], h2_env)
            with open(path) as f:
                example = json.load(f)
            results[name] = {"step_s": median_after_first(example["step_seconds"])}
            if "fallback_counts" in example:
                results[name]["fallbacks"] = sum(example["fallback_counts"].values())

    reference = results["h2 train (HeteroPP)"]["step_s"]
    print(f"\none training step of gpt-tiny on cpu-reference:0 (median of steps 2-{args.steps})")
    print(f"  {'':32s} {'step s':>9s} {'/ h2 train':>11s} {'fallbacks':>10s}")
    for name, r in results.items():
        r["ratio_to_h2_train"] = r["step_s"] / reference
        print(f"  {name:32s} {r['step_s']:9.3f} {r['ratio_to_h2_train']:11.2f} {str(r.get('fallbacks', '-')):>10s}")
    bridge = results["DiTorch, Python example"]
    print(f"  the bridge's step is {bridge['ratio_to_h2_train']:.2f}x h2 train's (goal: within 1.5x); "
          f"{bridge['fallbacks']} operator(s) ran on the CPU (goal: 0)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "ditorch_step", "model": "gpt-tiny", "device": "cpu-reference:0",
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
