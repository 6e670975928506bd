"""CuPy under libsalus with SALUS_MEM_LIMIT: arrays, its memory pool and
memGetInfo.  One job does it all; each case holds one aspect of that run.

  arrays: bytes copied in come back out as written, beside elementwise
  kernels (compiled at run time by NVRTC and loaded as modules), a
  reduction and a matrix product (cuBLAS); every kernel simgpu ran for the
  job went through libsalus.
  pool: an allocation over the limit raises CuPy's OutOfMemoryError with
  Salus's refusal said on stderr; one that fits only once the pool gives its
  cached blocks back succeeds (the pool frees them and retries).
  memGetInfo: the own view, the limit as total and as free the limit less
  what the process uses as salus-top shows it (read while the job waits
  right after the call) and what libsalus charged the context's modules.
"""
import fwlib
from fwlib import MIB, check

LIMIT = 384 * MIB
_run = {}


def job(args):
    import cupy as cp
    import numpy as np
    host = (np.arange(1 << 20, dtype=np.int64) * 2654435761 % 251).astype(np.float32)
    a = cp.asarray(host)
    b = a * 2 + 1                                   # elementwise kernels
    s = b.sum()                                     # a reduction
    m = a[:65536].reshape(256, 256) @ a[:65536].reshape(256, 256)   # cuBLAS
    cp.cuda.Device().synchronize()
    intact = bool(np.array_equal(cp.asnumpy(a), host))
    del b, s, m
    pool = cp.get_default_memory_pool()
    raised = ""
    try:
        cp.empty(1024 * MIB, dtype=cp.uint8)
    except cp.cuda.memory.OutOfMemoryError as e:
        raised = type(e).__name__
    held = cp.empty(192 * MIB, dtype=cp.uint8)
    del held                                        # to the pool, not the driver
    cached = pool.total_bytes()
    refit = cp.empty(256 * MIB, dtype=cp.uint8)     # fits once the cache is given back
    refit[:1 << 20].set(np.full(1 << 20, 7, dtype=np.uint8))
    refit_ok = bool((cp.asnumpy(refit[:1 << 20]) == 7).all())
    free, total = cp.cuda.runtime.memGetInfo()
    fwlib.ready()                                   # the driver reads the table meanwhile
    fwlib.did(intact=intact, raised=raised, cached=cached, refit_ok=refit_ok, free=free,
              total=total, pool_total=pool.total_bytes())


def the_run():
    """The one job, run once for every case."""
    if "job" not in _run:
        run = fwlib.Run("cupy")
        j = run.start("cupy", [], {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20)})
        try:
            j.await_ready(300)
            top = fwlib.procs(run.table).get(j.pid, {})
            j.go()
            j.expect_ok(300)
            _run["job"] = (j, run.kernels(), top)
        except (fwlib.Skip, fwlib.Fail) as e:
            _run["job"] = e
        finally:
            run.close()
    if isinstance(_run["job"], Exception):
        raise _run["job"]
    return _run["job"]


def case_arrays():
    j, ks, _ = the_run()
    d, r = j.did(), j.report()
    check(d["intact"], "bytes copied to the device came back changed")
    mine = [k for k in ks if k["pid"] == j.pid]
    check(len(mine) >= 4, "%d kernels of the job in the trace", len(mine))
    check(r.get("launches") == len(mine), "libsalus counted %s launches, simgpu ran %d kernels",
          r.get("launches"), len(mine))


def case_pool():
    j, _, top = the_run()
    d, r, err = j.did(), j.report(), j.err()
    check(d["raised"] == "OutOfMemoryError", "1 GiB over a 384 MiB limit raised %r", d["raised"])
    check("memory: refused" in err and "SALUS_MEM_LIMIT" in err,
          "Salus did not say on stderr that it refused the allocation at SALUS_MEM_LIMIT")
    check(d["cached"] >= 192 * MIB, "the pool did not keep the freed block (%d)", d["cached"])
    check(d["refit_ok"], "the allocation that fits after the pool's retry lost its bytes")
    check(r.get("oom_refusals", 0) >= 2, "libsalus refused %s times", r.get("oom_refusals"))


def case_mem_get_info():
    j, _, top = the_run()
    d, r = j.did(), j.report()
    check(d["total"] == LIMIT, "memGetInfo's total is %d, the limit %d", d["total"], LIMIT)
    check(top, "salus-top did not show the job")
    # salus-top's used is what the limit counts: the pool and the modules
    used, ctx = top["mem_used_bytes"], top.get("mem_context_bytes", -1)
    check(ctx > 0, "salus-top shows %d bytes of contexts and modules", ctx)
    check(used - ctx >= d["pool_total"], "salus-top shows %d bytes allocated, the pool holds %d",
          used - ctx, d["pool_total"])
    check(d["free"] == LIMIT - used, "memGetInfo's free is %d, the own view %d (the limit "
          "less %d used as salus-top shows it, %d of them modules)", d["free"], LIMIT - used,
          used, ctx)


if __name__ == "__main__":
    fwlib.main(job, [("cupy_arrays", case_arrays), ("cupy_pool", case_pool),
                     ("cupy_mem_get_info", case_mem_get_info)])
