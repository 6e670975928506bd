"""The PyTorch jobs' shared pieces: a small model and its training loop.

The model has what a real one has at a tiny size: a convolution (cuDNN),
linear layers (cuBLAS), Adam, and optionally AMP (autocast to fp16 with a
GradScaler).  Inputs are made on the host and copied (simgpu's kernels
compute nothing, so device-made random numbers would be zeros).  Each
iteration ends with a host sync, where libsalus finds its boundary; the
loop records when each sync returned (CLOCK_MONOTONIC ns) so that the
driver can tell a switch at a boundary from one inside an iteration.
Nothing here reads a computed value to decide anything.
"""
import torch
import torch.nn as nn

import fwlib


def model(width=64, conv=True):
    """With conv: a convolution first (cuDNN); without, linear layers only."""
    head = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()] if conv else []
    channels = 8 if conv else 3
    return nn.Sequential(
        *head, nn.Flatten(),
        nn.Linear(channels * 16 * 16, width), nn.ReLU(), nn.Linear(width, 10)).cuda()


def batch(n=16):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 3, 16, 16, generator=g).cuda()
    y = torch.randint(0, 10, (n,), generator=g).cuda()
    return x, y


class Trainer:
    """One model, its optimizer and batch; step() is one iteration."""

    def __init__(self, amp=False, width=64, conv=True):
        self.net = model(width, conv)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.amp = amp
        self.scaler = torch.amp.GradScaler("cuda") if amp else None
        self.x, self.y = batch()

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.amp):
            loss = nn.functional.cross_entropy(self.net(self.x), self.y)
        if self.amp:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        torch.cuda.synchronize()         # the iteration's one host sync


def train(trainer, iterations, stop=None, after_step=None):
    """Run iterations (or until stop.asked), after_step() after each step's
    sync when given; the sync-return times."""
    ends = []
    for _ in range(iterations):
        if stop is not None and stop.asked:
            break
        trainer.step()
        if after_step is not None:
            after_step()
        ends.append(fwlib.now_ns())
    return ends
