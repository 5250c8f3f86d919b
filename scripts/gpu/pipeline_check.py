#!/usr/bin/env python3
"""Issue 8's GPU check: a pipeline whose stages run on an accelerator's plugin and on cpu-reference
trains the same model as one device.

Three `h2 train` runs of gpt-tiny on the same data and seed:
  - pipeline: a cluster of one accelerator device and one cpu-reference device, each with 15 MiB
    usable, so that HeteroAuto must cut the model into a pipeline over both (activations go from
    one plugin's memory to the other's through DiComm, gradients come back);
  - cpu-reference alone: one device that holds the whole model (the reference);
  - the accelerator alone: likewise.
Prints each step's loss side by side and the largest relative difference from cpu-reference alone,
writes the table as JSON, and exits 1 when a run fails, the plan does not use both plugins, or a
loss differs by more than --tolerance. The machine's H2_PLUGIN_PATH must hold both plugins.

`--accelerator cpu-reference` runs the same check without a GPU (a dry run of this script), in
cpu-reference's strict mode, where as on a GPU no device memory is readable from the host, and with
its operators refusing f64 as the CUDA plugin's do (the first GPU run failed on an f64 copy).
"""

import argparse
import copy
import json
import os
import subprocess
import sys

CPU_TYPE = {
    "vendor": "H2 (CPU reference)",
    "plugin": "cpu-reference",
    "peak_tflops": {"bf16": 0.033, "f16": 0.033, "f32": 0.033},
    "efficiency": 0.04,
    "runtime_overhead_gib": 0.1,
    "host_link_gbps": 28,
}
ACCELERATOR_TYPE = {
    "vendor": "accelerator",
    "peak_tflops": {"bf16": 400, "f16": 400, "f32": 50},
    "efficiency": 0.01,
    "runtime_overhead_gib": 0.1,
    "host_link_gbps": 256,
}


def cluster(name, types):
    """One node group of one device per (type name, type description, memory GiB)."""
    return {
        "name": name,
        "device_types": [dict(description, name=type_name, memory_gib=memory)
                         for type_name, description, memory in types],
        "nic_types": [{"name": "loopback", "type": "ethernet", "bandwidth_gbps": 10, "latency_us": 20}],
        "nodes": [{"name": type_name, "device_type": type_name, "count": 1, "devices_per_node": 1,
                   "intra_node_bandwidth_gbps": 20, "nic": "loopback"} for type_name, _, _ in types],
        "device_direct_rdma": [],
    }


def train(args, name, description):
    """Runs h2 train; returns (plan, losses) or exits after printing why."""
    work = os.path.join(args.out, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "cluster.json")
    with open(path, "w") as f:
        json.dump(description, f, indent=2)
    # The default warm-up (10 steps): a learning rate at its peak within a few steps makes a loss spike
    # that magnifies rounding differences (the order of sums over other micro-batch sizes) to 1e-3.
    command = [args.h2, "train", "--cluster", path, "--model", args.model, "--steps", str(args.steps), "--out",
               os.path.join(work, "train")]
    if args.accelerator == "cpu-reference":
        # Plugin options reach every rank through the job file h2 train writes for them.
        command += ["--plugin-option", "cpu-reference:strict=1", "--plugin-option", "cpu-reference:op_dtypes=f32,f16,bf16"]
    print(f"== {name}: {' '.join(command)}", flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        # The output so far comes as bytes, even with text=True, on some Python versions.
        print("".join(o if isinstance(o, str) else o.decode(errors="replace") for o in (e.stdout, e.stderr) if o),
              file=sys.stderr)
        sys.exit(f"{name}: h2 train did not finish in {args.timeout} s")
    with open(os.path.join(work, "train.log"), "w") as f:
        f.write(done.stdout + done.stderr)
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        sys.exit(f"{name}: h2 train exited with {done.returncode}")
    with open(os.path.join(work, "train", "plan.json")) as f:
        plan = json.load(f)
    with open(os.path.join(work, "train", "metrics.jsonl")) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    return plan, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h2", required=True, help="the h2 program")
    parser.add_argument("--model", required=True, help="examples/models/gpt-tiny.json")
    parser.add_argument("--accelerator", default="cuda", help="the accelerator's plugin (default cuda)")
    parser.add_argument("--out", required=True, help="directory for the runs and pipeline_check.json")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest relative loss difference from cpu-reference alone (fp32 against fp64 "
                             "reference arithmetic)")
    parser.add_argument("--timeout", type=int, default=500, help="seconds per run")
    args = parser.parse_args()
    accelerator = dict(ACCELERATOR_TYPE, plugin=args.accelerator)

    tight = 0.115  # GiB: 15 MiB above the runtime overhead, too little for the whole model
    runs = {
        "pipeline": cluster("accelerator+cpu", [("accelerator", accelerator, tight), ("cpu", CPU_TYPE, tight)]),
        "cpu-reference alone": cluster("cpu", [("cpu", CPU_TYPE, 2)]),
        f"accelerator alone ({args.accelerator})": cluster("accelerator", [("accelerator", accelerator, 2)]),
    }
    results = {name: train(args, name.split(" (")[0].replace(" ", "-"), description) for name, description in runs.items()}

    plan = results["pipeline"][0]
    stages = [s for p in plan["pipelines"] for s in p["stages"]]
    layout = " -> ".join(f"{s['device_type']} {s['first_layer']}-{s['first_layer'] + s['layers'] - 1}" for s in stages)
    print(f"\npipeline plan: {layout}")
    failed = False
    if {s["device_type"] for s in stages} != {"accelerator", "cpu"}:
        print("the pipeline's plan does not use both plugins", file=sys.stderr)
        failed = True

    reference = results["cpu-reference alone"][1]
    names = list(results)
    print(f"\n{'step':>4}  " + "  ".join(f"{n:>32}" for n in names))
    for i in range(args.steps):
        print(f"{i + 1:>4}  " + "  ".join(f"{results[n][1][i]:>32.6f}" if i < len(results[n][1]) else f"{'-':>32}"
                                         for n in names))
    summary = {"plan": layout, "tolerance": args.tolerance, "runs": {}}
    for name in names:
        losses = results[name][1]
        if len(losses) != args.steps:
            print(f"{name}: {len(losses)} steps in metrics.jsonl, expected {args.steps}", file=sys.stderr)
            failed = True
            continue
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
        summary["runs"][name] = {"losses": losses, "largest_relative_difference": worst}
        verdict = "ok" if worst <= args.tolerance else f"MORE THAN {args.tolerance:g}"
        print(f"{name}: largest relative difference from cpu-reference alone {worst:.2e} ({verdict})")
        failed |= worst > args.tolerance
    with open(os.path.join(args.out, "pipeline_check.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
