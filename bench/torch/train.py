"""A plain PyTorch training job: no Salus in it, as a user writes one.

  python train.py --model mlp|cnn|transformer [--iterations N] [--batch B] [--name NAME]

The models are small versions of the three kinds a GPU cluster trains:
an MLP (cuBLAS GEMMs; 1024-4096-4096-1000, batch 4096), a residual CNN on
32x32 images (cuDNN convolutions, batch norm; batch 256) and a transformer
encoder classifying sequences of 128 tokens (attention, layer norm; 4
layers of width 256, batch 64).  Adam,
cross-entropy, one host sync per iteration (torch.cuda.synchronize(), as
a loop that logs its loss does).  Inputs are made on the host and copied
once.  Nothing reads a computed value to decide anything: over simgpu
(sim/README.md) kernels compute nothing.

At the end it prints one line, "RESULT <json>": its name, model,
iterations done, the wall time of the loop and of its set-up (seconds),
and the CLOCK_MONOTONIC ns at which each iteration's sync returned.
SIGTERM ends the loop at the next iteration.
"""
import argparse
import json
import signal
import sys
import time

import torch
import torch.nn as nn

stop = False
BATCH = {"mlp": 4096, "cnn": 256, "transformer": 64}


def on_term(*_):
    global stop
    stop = True


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                               nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False),
                               nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(x + self.f(x))


class Mean(nn.Module):
    """A sequence's tokens averaged: the classifier's input."""

    def forward(self, x):
        return x.mean(dim=1)


def build(kind, batch):
    """The model, an input batch and its labels (on the GPU)."""
    g = torch.Generator().manual_seed(1)
    if kind == "mlp":
        net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                            nn.Linear(4096, 1000))
        x = torch.randn(batch, 1024, generator=g)
        y = torch.randint(0, 1000, (batch,), generator=g)
    elif kind == "cnn":
        net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64),
                            nn.ReLU(), Block(64), Block(64), nn.Conv2d(64, 128, 3, stride=2,
                            padding=1), nn.ReLU(), Block(128), nn.AdaptiveAvgPool2d(1),
                            nn.Flatten(), nn.Linear(128, 10))
        x = torch.randn(batch, 3, 32, 32, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
    elif kind == "transformer":
        layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
        net = nn.Sequential(nn.Embedding(8000, 256), nn.TransformerEncoder(layer, 4),
                            Mean(), nn.Linear(256, 10))
        x = torch.randint(0, 8000, (batch, 128), generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
    else:
        sys.exit("train.py: unknown model %r (mlp, cnn, transformer)" % kind)
    return net.cuda(), x.cuda(), y.cuda()


def main():
    ap = argparse.ArgumentParser(description="a plain PyTorch training job")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--batch", type=int, default=0, help="default: the model's own")
    ap.add_argument("--name", default="")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    batch = a.batch or BATCH.get(a.model, 32)
    net, x, y = build(a.model, batch)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()
        torch.cuda.synchronize()

    step()                                  # the first: cuBLAS and cuDNN set-up
    t1 = time.monotonic()
    ends = []
    for _ in range(a.iterations):
        if stop:
            break
        step()
        ends.append(time.monotonic_ns())
    t2 = time.monotonic()
    print("RESULT " + json.dumps({"name": a.name or a.model, "model": a.model, "batch": batch,
                                  "iterations": len(ends), "setup_s": round(t1 - t0, 3),
                                  "loop_s": round(t2 - t1, 3), "ends": ends}), flush=True)


if __name__ == "__main__":
    main()
