"""Two and three PyTorch training jobs sharing one simgpu under libsalus.

Each job builds its model, says it is ready and waits for the driver's go
(fwlib.ready), so that loops start in the order a case needs whatever an
interpreter's start took.  A job trains until it has done its iterations or
is told to stop, and says when each iteration's sync returned.

  fair, two and three jobs: each lost the GPU only between its iterations
  (never inside one: fwlib.mid_iteration_switches), the lease changed hands
  many times, and equal jobs had shares of the GPU near equal while all ran.
  priority: a priority-90 job beside a priority-10 one took at most 1.25
  times as long as the same job alone on a GPU of its own at the same time
  (the bound test_sched_sim holds salus-train to); the low job ran, inside
  the high job's run, at most one of its iterations at a time.
  srtf: jobs of 60, 8 and 24 declared iterations (SALUS_ITERATIONS), started
  in that order, each once the one before ran, ended shortest first.
"""
import fwlib
from fwlib import check

READY_S = 240          # three interpreters importing torch on two loaded cores
RUN_S = 300
# Kernels of 100 us: an iteration (about 21 kernels) is mostly GPU time, as
# in training, not Python's (simgpu's default of 10 us makes it 1 ms of host).
SIM = {"SIMGPU_KERNEL_NS": 100000}
ITERS = 200


def job(args):
    import torch
    import fwtorch
    iters = int(args[0])
    t = fwtorch.Trainer(conv=False)
    t.step()                            # the first, slow one (cuDNN, cuBLAS set-up)
    torch.cuda.synchronize()
    stop = fwlib.Stop()
    fwlib.ready()
    t0 = fwlib.now_ns()
    ends = fwtorch.train(t, iters, stop)
    fwlib.did(iterations=len(ends), ends=ends, t0=t0, t1=fwlib.now_ns())


def iter_kernels(run, j):
    """Kernels per iteration of a job that ended (the warm-up's excluded)."""
    d = j.did()
    n = sum(k["pid"] == j.pid and k["start_ns"] >= d["t0"] for k in run.kernels())
    return n / max(1, d["iterations"])


def at_boundaries(run, jobs):
    """The loops' kernels (set-ups, before the first go, left out), each
    job having lost the GPU only at its boundaries."""
    go = min(j.did()["t0"] for j in jobs)
    ks = [k for k in run.kernels() if k["submit_ns"] >= go]
    for j in jobs:
        bad = fwlib.mid_iteration_switches(ks, j.pid, j.did()["ends"])
        check(not bad, "%s lost the GPU inside an iteration %d times (first after its kernel "
              "%s ending at %d)", j.name, len(bad), bad and bad[0][0]["name"], bad and bad[0][0]["end_ns"])
    return ks


def fair(n):
    run = fwlib.Run("fair%d" % n, env=SIM)
    try:
        # One set-up at a time: a first step (cuDNN and cuBLAS set-up) holds
        # the GPU with no boundary to hand over at, up to the max slice, and
        # fair repays a job that waited through another's: set-ups side by
        # side made the first loop run alone for seconds, in debt.  One
        # after the other, each set-up starts its job's wait lifted to the
        # other's virtual time (nobody waits then), and the loops start even.
        jobs = []
        for i in range(n):
            jobs.append(run.start("job%d" % i, [str(ITERS)], {"SALUS_POLICY": "fair"}))
            jobs[-1].await_ready(READY_S)
        for j in jobs:                  # in order: each comes while the others run
            j.go()
            fwlib.await_(j.ran_kernels, 60, "%s's first kernel" % j.name)
        for j in jobs:
            j.expect_ok(RUN_S)
        ks = at_boundaries(run, jobs)
        sw = len(fwlib.switches(ks))
        check(sw >= 4 * (n - 1), "the GPU changed hands %d times among %d jobs", sw, n)
        # Shares while all ran: from the last one's first kernel to the first end.
        t0 = max(min(k["start_ns"] for k in ks if k["pid"] == j.pid) for j in jobs)
        t1 = min(max(k["end_ns"] for k in ks if k["pid"] == j.pid) for j in jobs)
        check(t1 > t0, "the jobs never ran together")
        busy = [fwlib.busy_ns(ks, j.pid, t0, t1) for j in jobs]
        total = sum(busy) or 1
        for j, b in zip(jobs, busy):
            share = b / total
            check(0.5 / n <= share <= 1.5 / n, "%s had %.0f%% of the GPU while %d equal jobs ran",
                  j.name, share * 100, n)
    finally:
        run.close()


def case_fair2():
    fair(2)


def case_fair3():
    fair(3)


def case_priority():
    run = fwlib.Run("prio", env=SIM)
    own = fwlib.Run("prio-own", env=SIM)          # the reference: alone, at the same time
    try:
        low = run.start("low", ["100000"], {"SALUS_POLICY": "priority", "SALUS_PRIORITY": "10"})
        high = run.start("high", [str(ITERS // 2)], {"SALUS_POLICY": "priority", "SALUS_PRIORITY": "90"})
        ref = own.start("alone", [str(ITERS // 2)], {"SALUS_POLICY": "priority", "SALUS_PRIORITY": "90"})
        for j in (low, high, ref):
            j.await_ready(READY_S)
        low.go()
        fwlib.await_(lambda: low.ran_kernels(50), 60, "the low job's kernels")
        high.go()
        ref.go()
        high.expect_ok(RUN_S)
        ref.expect_ok(RUN_S)
        low.stop()
        low.expect_ok(RUN_S)
        h, a = high.did(), ref.did()
        shared, alone = (h["t1"] - h["t0"]) / 1e9, (a["t1"] - a["t0"]) / 1e9
        check(shared <= alone * 1.25, "the high job took %.2f s beside the low one, %.2f s alone",
              shared, alone)
        ks = at_boundaries(run, (high, low))
        h0 = min(k["start_ns"] for k in ks if k["pid"] == high.pid)
        h1 = max(k["end_ns"] for k in ks if k["pid"] == high.pid)
        per_iter = iter_kernels(run, low)
        streak = longest = 0
        for k in ks:
            if h0 <= k["start_ns"] and k["end_ns"] <= h1:
                streak = streak + 1 if k["pid"] == low.pid else 0
                longest = max(longest, streak)
        check(longest <= per_iter + 1, "the low job ran %d kernels in a row (%.0f an iteration) "
              "while the high job had work", longest, per_iter)
        check(high.report().get("switches", 0) >= 1, "the high job was never handed the GPU")
    finally:
        run.close()
        own.close()


def case_srtf():
    run = fwlib.Run("srtf", env=SIM)
    try:
        iters = (60, 8, 24)
        jobs = [run.start("job%d" % n, [str(n)], {"SALUS_POLICY": "srtf", "SALUS_ITERATIONS": n})
                for n in iters]
        for j in jobs:
            j.await_ready(READY_S)
        for j in jobs:                  # the longest first, holding the GPU when the others come
            j.go()
            fwlib.await_(j.ran_kernels, 60, "%s's first kernel" % j.name)
        for j in jobs:
            j.expect_ok(RUN_S)
        at_boundaries(run, jobs)
        end = [j.did()["t1"] for j in jobs]
        check(end[1] < end[2] < end[0], "jobs of %s iterations ended at %s ms", iters,
              [round((e - min(end)) / 1e6) for e in end])
    finally:
        run.close()


if __name__ == "__main__":
    fwlib.main(job, [("torch_fair_two", case_fair2), ("torch_fair_three", case_fair3),
                     ("torch_priority_90_beside_10", case_priority), ("torch_srtf", case_srtf)])
