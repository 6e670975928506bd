"""torch.distributed under libsalus: two ranks on two simgpu devices,
DistributedDataParallel training, over the gloo backend and over NCCL.

The ranks are started as torchrun starts them (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), from which libsalus makes them a gang.  What must
hold: both ranks end well, each ran its kernels on its own device, the
all-reduce moved real bytes (each rank's contribution, written from the
host, summed on the host side of gloo, read back), and while they ran the
table showed them as one gang (salus-top --json).

NCCL: its communicator is made over simgpu (NVML's topology, the buffers it
registers, its kernels' launches) and its collectives run as NCCL's
kernels, each rank's on its own device.  simgpu's kernels compute nothing,
so an NCCL all-reduce moves no bytes: the case checks that every rank ran
NCCL's kernels, trained and formed a gang, not the sum.
"""
import gc
import os
import socket

import fwlib
from fwlib import check

ITERS = 20


def job(args):
    import torch
    import torch.distributed as dist
    import fwtorch
    rank = int(os.environ["RANK"])
    backend = os.environ["FW_BACKEND"]
    torch.cuda.set_device(rank)
    dist.init_process_group(backend, timeout=__import__("datetime").timedelta(seconds=120))
    t = torch.full((1024,), float(rank + 1)).cuda()     # from the host: kernels compute nothing
    dist.all_reduce(t)             # gloo: 1 + 2 on every rank, through the host
    torch.cuda.synchronize()
    summed = bool((t.cpu() == 3.0).all())
    tr = fwtorch.Trainer(conv=False)
    if backend == "gloo":
        tr.net = torch.nn.parallel.DistributedDataParallel(tr.net, device_ids=[rank])
    # (NCCL: DDP checks that the ranks' models agree through an all-gather,
    # which moves no bytes over simgpu; the ranks train alone and reduce a
    # gradient-sized tensor after each step, NCCL's kernels in every
    # iteration.)
    fwlib.ready()
    ends = fwtorch.train(tr, ITERS, after_step=None if backend == "gloo" else
                         (lambda: dist.all_reduce(t)))
    dist.barrier()
    # DDP holds the process group: dropped first, the group's destruction
    # joins gloo's worker threads while the interpreter lives.  Left to the
    # interpreter's end, a worker that drops the last reference to a tensor
    # takes the GIL after finalization began and is ended by pthread_exit
    # inside a noexcept frame: std::terminate, SIGABRT (a teardown race of
    # PyTorch's own, no libsalus frame in its stack; about one run in 40).
    del tr
    gc.collect()
    dist.destroy_process_group()
    fwlib.did(rank=rank, device=torch.cuda.current_device(), summed=summed, iterations=len(ends))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gangs(table):
    """The gang names salus-top shows for the table's processes."""
    return {pid: p.get("gang") for pid, p in fwlib.procs(table).items()}


def two_ranks(backend):
    run = fwlib.Run("dist", devices=2)
    try:
        port = free_port()
        env = {"WORLD_SIZE": 2, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
               "SALUS_POLICY": "fair", "FW_BACKEND": backend}
        ranks = [run.start("rank%d" % r, [], dict(env, RANK=r, LOCAL_RANK=r)) for r in (0, 1)]
        ranks[0].await_ready(240, together=(ranks[1],))
        ranks[1].await_ready(240, together=(ranks[0],))
        seen = {}

        def both_in_a_gang():
            seen.update(gangs(run.table))
            g = [seen.get(j.pid) for j in ranks]
            return g[0] and g[0] == g[1]
        fwlib.await_(both_in_a_gang, 60, "both ranks in one gang in salus-top")
        for j in ranks:
            j.go()
        ranks[0].expect_ok(300, together=(ranks[1],))
        ranks[1].expect_ok(300, together=(ranks[0],))
        ks = run.kernels()
        for r, j in enumerate(ranks):
            d = j.did()
            check(d.get("iterations") == ITERS, "rank %d did %s iterations", r, d.get("iterations"))
            devs = {k["device"] for k in ks if k["pid"] == j.pid}
            check(devs == {r}, "rank %d ran kernels on devices %s", r, sorted(devs))
            if backend == "gloo":
                check(d.get("summed"), "rank %d's all-reduce did not sum the ranks' bytes", r)
            else:
                nccl = [k for k in ks if k["pid"] == j.pid and "nccl" in k["name"].lower()]
                check(nccl, "rank %d ran no NCCL kernel: its collectives did not reach the "
                      "device", r)
                check(j.report().get("launches", 0) >= len(nccl),
                      "rank %d: libsalus saw %s launches, fewer than NCCL's %d kernels", r,
                      j.report().get("launches"), len(nccl))
    finally:
        run.close()


def case_gloo():
    two_ranks("gloo")


def case_nccl():
    two_ranks("nccl")


if __name__ == "__main__":
    fwlib.main(job, [("torch_distributed_gloo_gang", case_gloo),
                     ("torch_distributed_nccl_gang", case_nccl)])
