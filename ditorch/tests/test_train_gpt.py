#!/usr/bin/python3
"""examples/torch/train_gpt.py on privateuseone reproduces CPU PyTorch, with no operator on the CPU.

(With H2_TRAIN_GPT_EXECUTABLE set, the same for the C++ example, examples/torch/train_gpt.cpp.)
Runs the example twice, as a user would: on the CPU, and on the H2 device H2_TORCH_DEVICES names with
H2_TORCH_FALLBACK=error (any operator without an H2 kernel would end the run). The 20 losses must
agree within 1e-4 relative. A smaller model than gpt-tiny (2 layers, 4 x 64 bytes a step) keeps it
quick on the emulated devices; the code path is the same.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch", "train_gpt.py")
ARGS = ["--steps", "20", "--layers", "2", "--batch", "4", "--seq-len", "64"]


def train(device, json_path, **env):
    program = [os.environ["H2_TRAIN_GPT_EXECUTABLE"]] if "H2_TRAIN_GPT_EXECUTABLE" in os.environ else [sys.executable, EXAMPLE]
    subprocess.run([*program, *ARGS, "--device", device, "--json", json_path],
                   env={**os.environ, **env}, check=True, timeout=600)
    with open(json_path) as f:
        return json.load(f)


class TrainGpt(unittest.TestCase):
    def test_losses_match_cpu_pytorch_with_no_fallback(self):
        with tempfile.TemporaryDirectory() as tmp:
            cpu = train("cpu", os.path.join(tmp, "cpu.json"))
            h2 = train("privateuseone", os.path.join(tmp, "h2.json"), H2_TORCH_FALLBACK="error")
        self.assertEqual(h2["h2_device"], os.environ["H2_TORCH_DEVICES"])
        self.assertEqual(h2["fallback_counts"], {})
        self.assertEqual(len(h2["losses"]), 20)
        worst = max(abs(a - b) / abs(a) for a, b in zip(cpu["losses"], h2["losses"]))
        print(f"largest relative loss difference over 20 steps: {worst:.2e}")
        self.assertLess(worst, 1e-4, f"CPU {cpu['losses']}\nH2  {h2['losses']}")
        self.assertLess(h2["losses"][-1], h2["losses"][0], "the model did not learn")


if __name__ == "__main__":
    unittest.main()
