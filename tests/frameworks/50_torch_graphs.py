"""CUDA graphs and torch.compile under libsalus.

  graphs: a job captures one training step with torch.cuda.graph and
  replays it, beside a peer that trains and so waits for the GPU whenever
  the graph's job holds it.  The capture is not broken (the job ends well,
  its replays ran as kernels of its own in the trace), the replays are
  gated: a replay's kernels never interleave with the peer's (the lease is
  not given up inside one), and libsalus counted each replay as a launch.
  compile: torch.compile (Inductor's Triton kernels, which Triton's own
  launcher sends to the driver through libcuda directly) trains ten steps;
  its Triton kernels ran, and every kernel went through libsalus.
"""
import fwlib
from fwlib import check

REPLAYS = 30


def job(args):
    import torch
    import fwtorch
    role = args[0]
    stop = fwlib.Stop()
    if role == "peer":
        t = fwtorch.Trainer(conv=False)
        t.step()
        fwlib.ready()
        ends = fwtorch.train(t, 100000, stop)
        fwlib.did(iterations=len(ends), ends=ends)
    elif role == "graph":
        net = fwtorch.model(conv=False)
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        x, y = fwtorch.batch()

        def step():
            opt.zero_grad(set_to_none=False)
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()

        side = torch.cuda.Stream()               # warm-up on a side stream, as torch asks
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        torch.cuda.synchronize()
        fwlib.ready()
        starts, ends = [], []
        for _ in range(REPLAYS):
            starts.append(fwlib.now_ns())
            g.replay()
            torch.cuda.synchronize()
            ends.append(fwlib.now_ns())
        fwlib.did(replays=len(ends), starts=starts, ends=ends)
    else:                                        # compile
        t = fwtorch.Trainer(conv=False)
        t.net = torch.compile(t.net)
        ends = fwtorch.train(t, 10)
        fwlib.did(iterations=len(ends))


def case_graphs():
    run = fwlib.Run("graphs")
    try:
        peer = run.start("peer", ["peer"], {"SALUS_POLICY": "fair"})
        gj = run.start("graph", ["graph"], {"SALUS_POLICY": "fair"})
        peer.await_ready(240)
        gj.await_ready(240)
        peer.go()
        fwlib.await_(lambda: peer.ran_kernels(20), 60, "the peer training")
        go = fwlib.now_ns()
        gj.go()
        gj.expect_ok(300)
        peer.stop()
        peer.expect_ok(120)
        d, r = gj.did(), gj.report()
        check(d.get("replays") == REPLAYS, "the graph's job did %s replays", d.get("replays"))
        ks = [k for k in run.kernels() if k["submit_ns"] >= go]
        mine = [k for k in ks if k["pid"] == gj.pid]
        check(len(mine) >= REPLAYS * 5, "%d kernels of %d replays in the trace", len(mine), REPLAYS)
        # One replay's kernels: submitted at once by its graph launch.
        for s, e in zip(d["starts"], d["ends"]):
            rk = [k for k in mine if s <= k["submit_ns"] <= e]
            if not rk:
                continue
            a, b = min(k["start_ns"] for k in rk), max(k["end_ns"] for k in rk)
            inside = [k for k in ks if k["pid"] == peer.pid and a < k["start_ns"] < b]
            check(not inside, "%d kernels of the peer ran inside a replay", len(inside))
        check(r.get("launches", 0) >= REPLAYS, "libsalus counted %s launches for %d replays",
              r.get("launches"), REPLAYS)
        check(peer.did().get("iterations", 0) > 0, "the peer trained no iteration")
    finally:
        run.close()


def case_compile():
    run = fwlib.Run("compile")
    try:
        j = run.start("compile", ["compile"], {"SALUS_POLICY": "fair"})
        j.expect_ok(600)
        r = j.report()
        mine = [k for k in run.kernels() if k["pid"] == j.pid]
        triton = [k for k in mine if k["name"].startswith("triton_")]
        check(triton, "no Triton kernel among the job's %d", len(mine))
        check(r.get("launches") == len(mine), "libsalus counted %s launches, simgpu ran %d kernels",
              r.get("launches"), len(mine))
    finally:
        run.close()


if __name__ == "__main__":
    fwlib.main(job, [("torch_cuda_graphs_beside_a_peer", case_graphs),
                     ("torch_compile", case_compile)])
