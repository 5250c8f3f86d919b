#!/usr/bin/python3
"""Two H2 devices of two plugins in one PyTorch program (H2_TORCH_DEVICES names both): tensors move
between them (through host memory), each computes what the CPU does, a model moves from one to the
other and trains on on each, and mixing them in one operator is an error naming both."""

import unittest

import torch
import torch.nn.functional as F

import h2torch

FIRST, SECOND = torch.device("privateuseone", 0), torch.device("privateuseone", 1)


class TwoDevices(unittest.TestCase):
    def test_the_devices_are_the_two_plugins(self):
        self.assertEqual(h2torch.device_count(), 2)
        self.assertNotEqual(h2torch.device_label(0).split(":")[0], h2torch.device_label(1).split(":")[0])

    def test_tensors_move_between_plugins(self):
        x = torch.randn(5, 7)
        there = x.to(FIRST).to(SECOND)
        self.assertEqual(there.device, SECOND)
        torch.testing.assert_close(there.cpu(), x, rtol=0, atol=0)
        back = there.t().to(FIRST, torch.float16)
        torch.testing.assert_close(back.cpu(), x.t().to(torch.float16), rtol=0, atol=0)

    def test_a_model_trains_on_one_device_then_the_other(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
        reference = torch.nn.Sequential(*[torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3)])
        reference.load_state_dict(model.state_dict())
        x, target = torch.randn(12, 8), torch.randint(0, 3, (12,))
        losses = []
        for device in (FIRST, SECOND):
            model.to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loss = F.cross_entropy(model(x.to(device)), target.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        expected = []
        optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        for _ in range(2):
            loss = F.cross_entropy(reference(x), target)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            expected.append(loss.item())
        for got, want in zip(losses, expected):
            self.assertAlmostEqual(got, want, places=5)

    def test_mixing_the_devices_in_one_operator_is_named(self):
        with self.assertRaisesRegex(RuntimeError, "expected all tensors on one device, found privateuseone:0 and "
                                                  "privateuseone:1"):
            torch.ones(2, device=FIRST) + torch.ones(2, device=SECOND)


if __name__ == "__main__":
    unittest.main()
