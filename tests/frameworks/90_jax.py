"""JAX under libsalus: a jit-compiled training step, and XLA's preallocation
sized from the process's own view under SALUS_MEM_LIMIT.

XLA's client preallocates, by default, 75% of the memory cuMemGetInfo calls
free (XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION); under
libsalus that is the process's limit, not the device's.

  jit: twenty steps of a jit-compiled SGD step of a two-layer MLP (XLA's
  kernels and cuBLAS) end well, libsalus found iterations (a host sync per
  step), every kernel simgpu ran went through libsalus (a direct launch
  each, or in a CUDA graph's launch: XLA's command buffers), and the
  parameters' bytes copied in came back intact.
  preallocate on: libsalus charged the job at least 70% and at most 100% of
  its limit, and jax reported a pool of about 75% of it.
  preallocate off: it charged far less than half the limit.

JAX starts its CUDA backend only where a device node exists (/dev/nvidia0,
/dev/nvidiactl or /dev/dxg: jax._src.hardware_utils.has_visible_nvidia_gpu,
asked before the plugin is), even under JAX_PLATFORMS=cuda, which then ends
in no backend at all; a driver that is a library, as simgpu, has no node.
Where there is none, the job registers the same CUDA PJRT plugin once more
through PJRT_NAMES_AND_LIBRARY_PATHS, JAX's variable for plugins named by
path, under the name "simgpu" (a JSON config: the library and the client
options that JAX's own generate_pjrt_gpu_plugin_options makes of this
process's XLA_PYTHON_CLIENT_* variables, as the plugin's own registration
does), and JAX_PLATFORMS=cuda,simgpu makes a failure to start it an error
rather than a quiet fall-back to the CPU.  The client, allocator and
kernels are then XLA's CUDA plugin's, unchanged.
"""
import json
import os

import fwlib
from fwlib import MIB, check

LIMIT = 1024 * MIB
STEPS = 20


NODES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")   # what JAX looks for


def use_cuda_plugin_without_node():
    """The CUDA PJRT plugin by path where JAX would not start it (above)."""
    if any(os.path.exists(n) for n in NODES):
        return
    import importlib.util
    from jaxlib import xla_client
    spec = importlib.util.find_spec("jax_plugins.xla_cuda13")
    lib = os.path.join(os.path.dirname(spec.origin), "xla_cuda_plugin.so")
    config = os.environ["FW_GO"] + ".pjrt.json"          # beside the job's other files
    with open(config, "w") as f:
        json.dump({"library_path": lib,
                   "create_options": xla_client.generate_pjrt_gpu_plugin_options()}, f)
    os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"] = "simgpu:" + config
    os.environ["JAX_PLATFORMS"] = "cuda,simgpu"


def job(args):
    use_cuda_plugin_without_node()
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
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    fwlib.did(steps=len(ends), intact=intact, platform=dev.platform, kind=dev.device_kind,
              homes=sorted({d.platform for a in (w1, w2, x) for d in a.devices()}),
              pool=stats.get("pool_bytes", stats.get("bytes_limit", -1)))


def jax_run(name, prealloc):
    run = fwlib.Run(name)
    try:
        j = run.start("jax", [], {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20),
                                   "XLA_PYTHON_CLIENT_PREALLOCATE": prealloc})
        j.expect_ok(400)
        d, r = j.did(), j.report()
        check(d.get("platform") == "gpu", "jax ran on %r, not the GPU", d.get("platform"))
        check("simgpu" in d.get("kind", ""), "jax's device is %r, not simgpu's", d.get("kind"))
        check(d.get("homes") == ["gpu"], "the arrays live on %s, not the GPU alone", d.get("homes"))
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
        # XLA runs a step's kernels as CUDA graphs (command buffers): one
        # launch for libsalus however many kernels simgpu's trace shows.
        direct = sum("graph" not in k for k in mine)
        graphs = {w["graph"] for w in fwlib.trace_load(run.trace)
                  if w["pid"] == j.pid and "graph" in w}
        check(r.get("launches") == direct + len(graphs),
              "libsalus counted %s launches, simgpu ran %d kernels directly and %d graphs",
              r.get("launches"), direct, len(graphs))
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
