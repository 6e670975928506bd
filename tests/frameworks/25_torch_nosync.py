"""A PyTorch loop that never syncs, beside a peer, under libsalus.

A small transformer (an embedding, four encoder layers, a head; Adam)
trains without `.item()` or any other sync in its loop, so that libsalus
finds no iteration from syncs and hands the GPU over at a kernel it
launches once per iteration (sched's kernel sequences); simgpu's launch
queue, as the driver's, keeps it at most 1024 launches ahead of the GPU.
Beside it, a peer trains with a sync per iteration, under fair.

What must hold: both finish; the GPU changed hands while the loop ran;
and every time the loop lost the GPU it was at the same point of its
iteration, found from the trace alone: the loop launches the same kernels
every iteration, so a kernel's place in its iteration is its index among
the loop's kernels modulo their number per iteration.  A detector that took
a layer's repeated kernels for the loop would cut at several places.  The
case prints where the cuts fell (that place, and how many cuts).
"""
import fwlib
from fwlib import check

ITERS = 240
SIM = {"SIMGPU_KERNEL_NS": 100000}


def transformer():
    import torch
    import torch.nn as nn
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                       batch_first=True, dropout=0.0)
    return nn.Sequential(nn.Embedding(100, 32), nn.TransformerEncoder(layer, num_layers=4),
                         nn.Flatten(), nn.Linear(32 * 16, 10)).cuda()


def job(args):
    import torch
    if args[0] == "peer":
        import fwtorch
        t = fwtorch.Trainer(conv=False)
        t.step()
        stop = fwlib.Stop()
        fwlib.ready()
        ends = fwtorch.train(t, 100000, stop)
        fwlib.did(iterations=len(ends))
        return
    net = transformer()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 100, (8, 16), generator=g).cuda()
    y = torch.randint(0, 10, (8,), generator=g).cuda()

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(3):                   # set-up: cuBLAS handles, Adam's state
        step()
    torch.cuda.synchronize()
    fwlib.ready()
    t0 = fwlib.now_ns()
    for _ in range(ITERS):
        step()                           # no sync: the host runs ahead
    torch.cuda.synchronize()
    fwlib.did(iterations=ITERS, t0=t0, t1=fwlib.now_ns())


def cuts(kernels, pid, per, total):
    """The places in the iteration after which the loop lost the GPU, in
    order (its end, after its last kernel, is no cut)."""
    at, seen = [], 0
    for a, b in zip(kernels, kernels[1:]):
        if a["pid"] == pid:
            seen += 1
            if b["pid"] != pid and seen < total:
                at.append((seen - 1) % per)
    return at


def case_nosync():
    run = fwlib.Run("nosync", env=SIM)
    try:
        fair = {"SALUS_POLICY": "fair"}
        peer, loop, _, _ = fwlib.beside_peer(run, "loop", ["loop"], fair, fair)
        d = loop.did()
        ks = sorted((k for k in run.kernels() if k["start_ns"] >= d["t0"]),
                    key=lambda k: k["start_ns"])
        mine = [k for k in ks if k["pid"] == loop.pid and k["submit_ns"] >= d["t0"]]
        check(mine and len(mine) % ITERS == 0, "%d kernels in %d iterations: not the same "
              "kernels each iteration", len(mine), ITERS)
        per = len(mine) // ITERS
        names = [k["name"] for k in mine]
        check(names[:per] * ITERS == names, "the loop's iterations launch different kernels")
        ks = [k for k in ks if k["pid"] != loop.pid or k["submit_ns"] >= d["t0"]]
        at = cuts(ks, loop.pid, per, len(mine))
        main = max(set(at), key=at.count) if at else None
        print("the loop (%d kernels an iteration) lost the GPU %d times, %d of them after "
              "its kernel %s; in order: %s" % (per, len(at), at.count(main), main, at))
        check(len(at) >= 3, "the loop lost the GPU %d times", len(at))
        # One cut may come before the loop has run three times since the
        # peer began waiting (the max slice's); all the others at one place.
        check(len(at) - at.count(main) <= 1, "the loop lost the GPU at %d places of its "
              "iteration: %s", len(set(at)), at)
    finally:
        run.close()


if __name__ == "__main__":
    fwlib.main(job, [("torch_loop_without_syncs", case_nosync)])
