"""PyTorch training under each of its three allocators, under libsalus: the
caching allocator, expandable segments (PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True, the driver's VMM) and the cudaMallocAsync backend
(stream-ordered pools).

The job trains the AMP model (a convolution, linear layers, Adam, a
GradScaler: tensors of many sizes freed and asked again every iteration),
then writes a tensor from the host and reads it back.  What must hold: the
job ends well, every iteration done, libsalus found iterations and counted
every kernel of the job, and the bytes came back intact.  Under
backend:cudaMallocAsync this once failed with "invalid argument": simgpu
reused a pool's cached block for a larger request of the same charge (640
bytes freed, 864 asked, 1024 charged each) and kept the old size, so the
memset over the new tensor ran past it (sim/pool.c).
"""
import fwlib
from fwlib import check

ITERS = 10


def job(args):
    import torch
    import fwtorch
    t = fwtorch.Trainer(amp=True)
    ends = fwtorch.train(t, ITERS)
    pattern = torch.arange(1 << 18, dtype=torch.int32) * 2654435761 % 251
    back = pattern.cuda().cpu()
    fwlib.did(iterations=len(ends), intact=bool(torch.equal(back, pattern)),
              backend=torch.cuda.get_allocator_backend())


def train_case(name, conf, backend):
    run = fwlib.Run(name)
    try:
        j = run.start("torch", [], {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {})
        j.expect_ok(300)
        d, r = j.did(), j.report()
        check(d.get("backend") == backend, "PyTorch's allocator is %r, not %r",
              d.get("backend"), backend)
        check(d.get("iterations") == ITERS, "the job did %s iterations of %d",
              d.get("iterations"), ITERS)
        check(d.get("intact"), "bytes written from the host came back changed")
        check(r.get("iterations", 0) >= ITERS // 2, "libsalus found %s iterations in %d",
              r.get("iterations"), ITERS)
        mine = sum(k["pid"] == j.pid for k in run.kernels())
        check(mine >= ITERS * 10 and r.get("launches") == mine,
              "libsalus counted %s launches, simgpu ran %d kernels of the job",
              r.get("launches"), mine)
    finally:
        run.close()


def case_caching():
    train_case("train-caching", "", "native")


def case_expandable():
    train_case("train-expandable", "expandable_segments:True", "native")


def case_async():
    train_case("train-async", "backend:cudaMallocAsync", "cudaMallocAsync")


if __name__ == "__main__":
    fwlib.main(job, [("torch_train_caching_allocator", case_caching),
                     ("torch_train_expandable_segments", case_expandable),
                     ("torch_train_cudaMallocAsync", case_async)])
