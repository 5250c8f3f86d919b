#!/usr/bin/env python3
"""Gradient sums overlapped with the backward pass, against the same sums after it.

Four data-parallel replicas of gpt-tiny (one cpu-reference device each, 4 micro-batches per replica)
train with `--overlap-grad-reduce off` and `on`, and, with overlap, with 16-bit gradient messages.
Each run's metrics.jsonl gives every rank's exposed gradient-communication time per step (what the
step waited for after its pipeline) and the sums' own time; the table shows their medians over the
steps after the first, the mean over ranks, and the share of the exposed time that overlap hid.

The ranks talk over tcp on a loopback link shaped to a rate (tc tbf; two rates, where the sums take
about half and about all of the last backward pass's time) inside a network namespace this script
creates, so that the sums are bound by the wire, as on a cluster, and not by the two cores the
four ranks' compute already fills: on this machine's own loopback, a sum costs the CPU time that the
backward pass needs, and nothing can hide it. Without namespaces (not root), it runs unshaped and says
so. Prints a table and writes JSON; exits non-zero when a run fails; never asserts a timing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CLUSTER = {
    "name": "dp4",
    "device_types": [{
        "name": "cpu-reference-1gib",
        "vendor": "H2 (CPU reference)",
        "plugin": "cpu-reference",
        "peak_tflops": {"bf16": 0.033, "f16": 0.033, "f32": 0.033},
        "memory_gib": 1,
        "efficiency": 0.04,
        "runtime_overhead_gib": 0.1,
        "host_link_gbps": 28,
    }],
    "nic_types": [{"name": "shaped-loopback", "type": "ethernet", "bandwidth_gbps": 1, "latency_us": 20}],
    "nodes": [{"name": "dp", "device_type": "cpu-reference-1gib", "count": 1, "devices_per_node": 4,
               "intra_node_bandwidth_gbps": 1, "intra_node_latency_us": 20, "nic": "shaped-loopback",
               "nics_per_node": 1}],
    "device_direct_rdma": [],
}


def run(command, env=None, timeout=900):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


class ShapedLoopback:
    """A network namespace whose loopback carries `rate` at most (tc tbf), or None without root."""

    def __init__(self, rate):
        self.name = f"h2overlap-{os.getpid()}"
        self.rate = rate
        self.ok = False

    def __enter__(self):
        code, _ = run(["ip", "netns", "add", self.name])
        if code != 0:
            return self
        self.ok = True
        for step in (["ip", "-n", self.name, "link", "set", "lo", "up"],
                     ["tc", "-n", self.name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", self.rate,
                      "burst", "256kb", "latency", "50ms"]):
            code, out = run(step)
            if code != 0:
                print(f"note: {' '.join(step)} failed ({out.strip()}); the link is not shaped", file=sys.stderr)
                self.rate = None
        return self

    def __exit__(self, *exc):
        if self.ok:
            run(["ip", "netns", "del", self.name])

    def wrap(self, command):
        return ["ip", "netns", "exec", self.name] + command if self.ok else command


def train(args, link, work, name, extra):
    out = os.path.join(work, name)
    command = link.wrap([args.h2, "train", "--cluster", os.path.join(work, "cluster.json"), "--model", args.model,
                         "--plan", os.path.join(work, "plan.json"), "--steps", str(args.steps), "--out", out] + extra)
    env = dict(os.environ, H2_PLUGIN_PATH=args.plugin_path, H2_FABRIC_PROVIDER="tcp;ofi_rxm",
               H2_DICOMM_NODE_TRANSPORT="off", H2_DICOMM_TIMEOUT="120")
    code, output = run(command, env)
    if code != 0:
        sys.exit(f"{name}: h2 train failed ({code}):\n{output[-3000:]}")
    steps = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))][1:]  # after the first
    ranks = len(steps[0]["ranks"])

    def median(key, r):
        return statistics.median(s["ranks"][r][key] for s in steps)

    return {
        "exposed_s": statistics.mean(median("exposed_comm_s", r) for r in range(ranks)),
        "gradient_comm_s": statistics.mean(median("gradient_comm_s", r) for r in range(ranks)),
        "step_s": statistics.median(s["step_s"] for s in steps),
        "losses": [s["loss"] for s in steps],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h2", required=True)
    parser.add_argument("--plugin-path", required=True)
    parser.add_argument("--model", required=True, help="examples/models/gpt-tiny.json")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rates", default="2gbit,1gbit",
                        help="the loopback's rates (tc tbf), one measurement each: comm below and about the "
                             "backward pass's time")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    results = []
    for rate in args.rates.split(","):
        with tempfile.TemporaryDirectory() as work, ShapedLoopback(rate) as link:
            results.append(measure(args, link, work))
    goal = max(r["runs"]["overlapped"]["hidden"] for r in results)
    print(f"\ngoal: at least half of the exposed gradient-communication time hidden: best {goal * 100:.0f}% "
          f"({'met' if goal >= 0.5 else 'NOT met'}); overlap cannot hide more than the step's last backward pass "
          "lasts, so the share falls where the sums take about as long as that pass")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if not all(r["same_losses"] for r in results):
        sys.exit("overlap changed the losses")


def measure(args, link, work):
    with open(os.path.join(work, "cluster.json"), "w") as f:
        json.dump(CLUSTER, f)
    code, output = run([args.h2, "plan", "--cluster", os.path.join(work, "cluster.json"), "--model", args.model,
                        "--max-tp", "1", "--output", os.path.join(work, "plan.json")])
    if code != 0:
        sys.exit(f"h2 plan failed:\n{output}")
    plan = json.load(open(os.path.join(work, "plan.json")))
    replicas = sum(len(p["replicas"]) for p in plan["pipelines"])
    stages = {len(p["stages"]) for p in plan["pipelines"]}
    if replicas != 4 or stages != {1}:
        sys.exit(f"expected HeteroAuto to plan 4 single-stage replicas, got {replicas} replicas, stages {stages}")
    runs = {
        "after the pipeline": train(args, link, work, "off", ["--overlap-grad-reduce", "off"]),
        "overlapped": train(args, link, work, "on", ["--overlap-grad-reduce", "on"]),
        "overlapped, bf16 messages": train(args, link, work, "bf16",
                                           ["--overlap-grad-reduce", "on", "--grad-comm-dtype", "bf16"]),
    }
    base = runs["after the pipeline"]["exposed_s"]
    where = f"tcp over a loopback shaped to {link.rate}" if link.ok and link.rate else \
        "tcp over this machine's loopback (unshaped)"
    print(f"\n4 data-parallel replicas of gpt-tiny, {where}; medians of steps 2-{args.steps}, mean over ranks")
    print(f"{'gradient sums':28} {'sums (ms)':>10} {'exposed (ms)':>13} {'hidden':>8} {'step (s)':>9}")
    for name, r in runs.items():
        r["hidden"] = 1 - r["exposed_s"] / base if base > 0 else 0
        print(f"{name:28} {r['gradient_comm_s'] * 1e3:10.1f} {r['exposed_s'] * 1e3:13.1f} {r['hidden'] * 100:7.0f}% "
              f"{r['step_s']:9.3f}")
    same = runs["after the pipeline"]["losses"] == runs["overlapped"]["losses"]
    print(f"losses with and without overlap: {'identical' if same else 'DIFFERENT'}")
    return {"link": where, "runs": runs, "same_losses": same}


if __name__ == "__main__":
    main()
