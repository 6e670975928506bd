"""SALUS_SWAP=on: a low-priority PyTorch job is paged out of a full simgpu
for a high-priority one, and comes back with its bytes intact.

Both jobs hold a 1 GiB tensor on a device of 2 GiB, so they do not fit
together.  The low one writes a pattern over all of its tensor from the host
and trains; the high one then comes, allocates its tensor, trains 20
iterations and ends; the low one trains on and, told to stop, reads its
tensor back.  What must hold: the high job's allocation succeeded (no
refusal), the low job was paged out and in (swap_outs, swap_ins), its bytes
came back as written, and it trained after the high job ended.  Under the
caching allocator and the cudaMallocAsync backend; expandable segments'
memory is the program's own VMM handles, which libsalus(7) says paging does
not move.
"""
import fwlib
from fwlib import MIB, check

HOLD = 1024 * MIB
ENV = {"SALUS_SWAP": "on", "SALUS_POLICY": "priority"}


def job(args):
    import torch
    import fwtorch
    role, iters = args[0], int(args[1])
    t = fwtorch.Trainer(conv=False)
    t.step()
    stop = fwlib.Stop()
    fwlib.ready()
    hold = torch.empty(HOLD, dtype=torch.uint8, device="cuda")
    base = (torch.arange(MIB + 7, dtype=torch.int64) * 2654435761 % 251).to(torch.uint8)
    pattern = torch.cat([base[i % 7:i % 7 + MIB] for i in range(HOLD // MIB)])   # 1 GiB, shifted MiBs
    hold.copy_(pattern)
    torch.cuda.synchronize()
    ends = fwtorch.train(t, iters, stop)
    intact = bool(torch.equal(hold.cpu(), pattern))
    fwlib.did(role=role, iterations=len(ends), ends=ends, intact=intact)


def swap_case(name, conf):
    run = fwlib.Run(name, memory="2G")
    try:
        env = dict(ENV)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        low = run.start("low", ["low", "100000"], dict(env, SALUS_PRIORITY=10))
        high = run.start("high", ["high", "20"], dict(env, SALUS_PRIORITY=90))
        low.await_ready(240)
        high.await_ready(240)
        low.go()
        fwlib.await_(lambda: low.ran_kernels(100), 120, "the low job training")
        high.go()
        high.expect_ok(120)                      # alone it takes seconds
        high_end = max(k["end_ns"] for k in run.kernels() if k["pid"] == high.pid)
        fwlib.await_(lambda: any(k["pid"] == low.pid and k["start_ns"] > high_end
                                 for k in run.kernels()), 120, "the low job training again")
        low.stop()
        low.expect_ok(300)
        h, lo, hr, lr = high.did(), low.did(), high.report(), low.report()
        check(h.get("iterations") == 20, "the high job did %s iterations", h.get("iterations"))
        check(hr.get("oom_refusals", 0) == 0, "the high job was refused memory %s times",
              hr.get("oom_refusals"))
        check(lr.get("swap_outs", 0) >= 1 and lr.get("swap_ins", 0) >= 1,
              "the low job was paged out %s times and in %s", lr.get("swap_outs"), lr.get("swap_ins"))
        check(lr.get("swap_bytes", 0) >= 2 * HOLD, "paging moved %s bytes of the low job",
              lr.get("swap_bytes"))
        check(lo.get("intact"), "the low job's bytes changed while it was paged out")
    finally:
        run.close()


def case_caching():
    swap_case("swap-caching", "")


def case_async():
    swap_case("swap-async", "backend:cudaMallocAsync")


if __name__ == "__main__":
    fwlib.main(job, [("torch_swap_caching", case_caching),
                     ("torch_swap_cudaMallocAsync", case_async)])
