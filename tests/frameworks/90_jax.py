"""JAX under libsalus: a jit-compiled training step, and XLA's preallocation
sized from the process's own view under SALUS_MEM_LIMIT.

XLA's client preallocates, by default, 75% of the memory cuMemGetInfo calls
free (XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION); under
libsalus that is the process's limit, not the device's.

  jit: twenty steps of a jit-compiled SGD step of a two-layer MLP (XLA's
  kernels and cuBLAS) end well, libsalus found iterations (a host sync per
  step), every kernel simgpu ran went through libsalus, and the parameters'
  bytes copied in came back intact.
  preallocate on: libsalus charged the job at least 70% and at most 100% of
  its limit, and jax reported a pool of about 75% of it.
  preallocate off: it charged far less than half the limit.
"""
import fwlib
from fwlib import MIB, check

LIMIT = 1024 * MIB
STEPS = 20


def job(args):
    import jax
    import jax.numpy as jnp
    import numpy as np

    host = (np.arange(64 * 64) * 2654435761 % 251).astype(np.float32).reshape(64, 64)
    w1 = jax.device_put(host)
    w2 = jax.device_put(host.T.copy())
    x = jax.device_put(np.ones((32, 64), np.float32))

    @jax.jit
    def step(w1, w2, x):
        def loss(w1, w2):
            return jnp.mean(jnp.tanh(x @ w1) @ w2)
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 1e-3 * g1, w2 - 1e-3 * g2

    intact = bool(np.array_equal(np.asarray(w1), host))
    ends = []
    for _ in range(STEPS):
        w1, w2 = step(w1, w2, x)
        w1.block_until_ready()
        ends.append(fwlib.now_ns())
    stats = jax.devices()[0].memory_stats() or {}
    fwlib.did(steps=len(ends), intact=intact, platform=jax.devices()[0].platform,
              pool=stats.get("pool_bytes", stats.get("bytes_limit", -1)))


def jax_run(name, prealloc):
    run = fwlib.Run(name)
    try:
        j = run.start("jax", [], {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20),
                                   "XLA_PYTHON_CLIENT_PREALLOCATE": prealloc})
        j.expect_ok(400)
        d, r = j.did(), j.report()
        check(d.get("platform") == "gpu", "jax ran on %r, not the GPU", d.get("platform"))
        check(d.get("steps") == STEPS, "the job did %s steps", d.get("steps"))
        check(r, "libsalus wrote no report for pid %d", j.pid)
        return run, j, d, r
    except BaseException:
        run.close()
        raise


def case_jit():
    run, j, d, r = jax_run("jax-jit", "false")
    try:
        check(d["intact"], "the parameters' bytes came back changed")
        mine = [k for k in run.kernels() if k["pid"] == j.pid]
        check(len(mine) >= STEPS, "%d kernels of the job for %d steps", len(mine), STEPS)
        check(r.get("launches") == len(mine), "libsalus counted %s launches, simgpu ran %d kernels",
              r.get("launches"), len(mine))
        check(r.get("iterations", 0) >= STEPS // 2, "libsalus found %s iterations in %d steps",
              r.get("iterations"), STEPS)
    finally:
        run.close()


def case_preallocate_on():
    run, j, d, r = jax_run("jax-prealloc", "true")
    try:
        peak = r.get("mem_peak_bytes", 0)
        check(0.70 * LIMIT <= peak <= LIMIT, "XLA preallocated %d bytes under a limit of %d "
              "(75%% of the own view expected)", peak, LIMIT)
        check(0.70 * LIMIT <= d["pool"] <= 0.80 * LIMIT, "jax's pool is %s bytes, not 75%% of %d",
              d["pool"], LIMIT)
    finally:
        run.close()


def case_preallocate_off():
    run, j, d, r = jax_run("jax-noprealloc", "false")
    try:
        peak = r.get("mem_peak_bytes", 0)
        check(0 < peak < LIMIT // 2, "without preallocation XLA took %d bytes of %d", peak, LIMIT)
    finally:
        run.close()


if __name__ == "__main__":
    fwlib.main(job, [("jax_jit_step", case_jit), ("jax_preallocate_on", case_preallocate_on),
                     ("jax_preallocate_off", case_preallocate_off)])
