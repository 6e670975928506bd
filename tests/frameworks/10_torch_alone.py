"""PyTorch alone under libsalus: a training loop (a convolution, linear
layers, Adam, with and without AMP) over simgpu.

What must hold: the job ends well; libsalus found its iterations; every
kernel simgpu ran for it went through libsalus (the report's launches equal
the trace's kernels of the job: PyTorch, cuBLAS and cuDNN launch through the
runtime, which reaches the driver through cuGetProcAddress); and
torch.cuda.mem_get_info() is the process's own view under SALUS_MEM_LIMIT:
its limit as the total, the limit less what libsalus charged it as free.
"""
import fwlib
from fwlib import GIB, check

ITERS = 30
LIMIT = 1 * GIB


def job(args):
    import torch
    import fwtorch
    amp = args[0] == "amp"
    t = fwtorch.Trainer(amp=amp)
    ends = fwtorch.train(t, ITERS)
    free, total = torch.cuda.mem_get_info()
    fwlib.did(iterations=len(ends), ends=ends, free=free, total=total,
              reserved=torch.cuda.memory_reserved(), device=torch.cuda.get_device_name())


def alone(amp):
    run = fwlib.Run("alone")
    try:
        j = run.start("torch", ["amp" if amp else "fp32"],
                      {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20), "SALUS_POLICY": "fair"})
        j.expect_ok(300)
        d, r = j.did(), j.report()
        check(d.get("iterations") == ITERS, "the job did %s iterations of %d", d.get("iterations"), ITERS)
        check(r, "libsalus wrote no report for pid %d", j.pid)
        # Found boundaries: AMP's GradScaler adds a sync of its own inside
        # each iteration, which a detector may take as a boundary too.
        its = r.get("iterations", 0)
        check(ITERS // 2 <= its <= 2 * ITERS + 2, "libsalus found %d iterations in %d", its, ITERS)
        mine = [k for k in run.kernels() if k["pid"] == j.pid]
        check(len(mine) >= ITERS * 10, "only %d kernels in the trace for %d iterations", len(mine), ITERS)
        check(r.get("launches") == len(mine),
              "libsalus counted %s launches, simgpu ran %d kernels of the job: some went around it",
              r.get("launches"), len(mine))
        check(d["total"] == LIMIT, "mem_get_info's total is %d, the limit %d", d["total"], LIMIT)
        # used: what the limit counts, its context and modules (loaded
        # lazily, kept to the end) included; mem_context_bytes their part
        used, ctx = r.get("mem_used_bytes", -1), r.get("mem_context_bytes", 0)
        check(d["reserved"] > 0 and used - ctx >= d["reserved"],
              "libsalus charged %d bytes, the caching allocator holds %d", used - ctx,
              d["reserved"])
        check(d["free"] == LIMIT - used,
              "mem_get_info's free is %d, the own view %d (limit %d less %d used, %d of them "
              "modules)", d["free"], LIMIT - used, LIMIT, used, ctx)
    finally:
        run.close()


def case_fp32():
    alone(False)


def case_amp():
    alone(True)


if __name__ == "__main__":
    fwlib.main(job, [("torch_alone_fp32", case_fp32), ("torch_alone_amp", case_amp)])
