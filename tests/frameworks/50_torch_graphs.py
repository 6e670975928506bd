"""CUDA graphs and torch.compile under libsalus.

  graphs: a job captures one training step with torch.cuda.graph and
  replays it, beside a peer that trains and so waits for the GPU whenever
  the graph's job holds it.  The capture is not broken (the job ends well,
  its replays ran as kernels of its own in the trace), the replays are
  gated: a replay's kernels never interleave with the peer's (the lease is
  not given up inside one), and libsalus counted each replay as a launch.
  startup: vLLM's start-up loop (for each batch size, largest first: an
  eager warm-up, a sync, a capture into one shared pool, a sync), 100
  captures in a row, with SALUS_SWAP=on (so the allocator keeps chunks that
  its drain thread lets go of), beside the same training peer under fair
  with a 1 ms quantum: handoffs fall due all through the loop.  No capture
  is broken (torch raises on an invalidated one), every graph replays, and
  the GPU changed hands during the loop (the peer did wait and run).
  compile: torch.compile (Inductor's Triton kernels, which Triton's own
  launcher sends to the driver through libcuda directly) trains ten steps;
  its Triton kernels ran, and every kernel went through libsalus.
"""
import fwlib
from fwlib import check

REPLAYS = 30
CAPTURES = 100


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
    elif role == "startup":
        broken, graphs, ms = startup_loop()
        fwlib.did(captures=len(graphs), broken=broken[:3], nbroken=len(broken), loop_ms=ms)
    else:                                        # compile
        t = fwtorch.Trainer(conv=False)
        t.net = torch.compile(t.net)
        ends = fwtorch.train(t, 10)
        fwlib.did(iterations=len(ends))


def startup_loop():
    """vLLM's capture loop: the broken captures' first lines, the graphs,
    the loop's ms."""
    import torch
    import fwtorch
    net = fwtorch.model(conv=False).eval()
    pool = torch.cuda.graph_pool_handle()
    fwlib.ready()
    # vLLM empties the cache before it captures: the freed chunks are kept
    # mapped by libsalus for a while, and let go of by its drain thread.
    torch.empty(64 << 20, dtype=torch.uint8, device="cuda")     # freed at once
    torch.cuda.empty_cache()
    broken, graphs = [], []
    t0 = fwlib.now_ns()
    with torch.no_grad():
        for i in range(CAPTURES):
            x = torch.randn(CAPTURES - i, 3, 16, 16).cuda()
            net(x)                               # the warm-up of this size
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(g, pool=pool):
                    net(x)
                graphs.append(g)
            except RuntimeError as e:
                broken.append("capture %d: %s" % (i, str(e).splitlines()[0][:160]))
            torch.cuda.synchronize()
        for g in graphs:
            g.replay()
        torch.cuda.synchronize()
    return broken, graphs, (fwlib.now_ns() - t0) // 1000000


def case_graphs():
    run = fwlib.Run("graphs")
    try:
        fair = {"SALUS_POLICY": "fair"}
        peer, gj, go, _ = fwlib.beside_peer(run, "graph", ["graph"], fair, fair)
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


def case_startup_loop():
    run = fwlib.Run("startup")
    try:
        fair = {"SALUS_POLICY": "fair", "SALUS_QUANTUM_MS": "1"}
        peer, sj, go, done = fwlib.beside_peer(run, "startup", ["startup"],
                                               dict(fair, SALUS_SWAP="on"), fair)
        d = sj.did()
        check(d.get("nbroken") == 0, "%s of %d captures broken: %s",
              d.get("nbroken"), CAPTURES, d.get("broken"))
        check(d.get("captures") == CAPTURES, "%s graphs of %d captures",
              d.get("captures"), CAPTURES)
        ks = sorted((k for k in run.kernels() if go <= k["start_ns"] <= done),
                    key=lambda k: k["start_ns"])
        turns = len(fwlib.switches(ks))
        check(turns >= 4, "the GPU changed hands %d times during the loop", turns)
        check(any(k["pid"] == peer.pid for k in ks), "the peer ran nothing during the loop")
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
                     ("torch_graph_startup_loop", case_startup_loop),
                     ("torch_compile", case_compile)])
