"""NVIDIA's cuda-bindings (cuda.bindings.driver) over the driver, for
tests/test_clients.c.

cuda.bindings resolves every entry point it calls through cuGetProcAddress
with its own CUDA version and flags: with CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM
set (to anything: it tests the string, so "0" turns it on too) it asks for
the per-thread default stream variants (cuLaunchKernel_ptsz,
cuMemcpyDtoH_v2_ptds, ...).  The work is pyclient's: a cubin loaded with
cuModuleLoad, salus_fill launched with cuLaunchKernel over each buffer
(simgpu emulates it, so the bytes copied back are checked), copies both
ways, allocations under the limit and the own view.

  python cubindings.py <kernels.cubin>
"""
import os

import numpy as np
from cuda.bindings import driver as cu

import pyclient as pc

OK = cu.CUresult.CUDA_SUCCESS


def call(name, *args):
    """cu.<name>(*args), its results without the status; failing on an error."""
    out = getattr(cu, name)(*args)
    if out[0] != OK:
        pc.fail("%s: %s" % (name, out[0]))
    return out[1] if len(out) == 2 else out[1:]


def main():
    per_thread = bool(os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM"))
    call("cuInit", 0)
    dev = call("cuDeviceGet", 0)
    ctx = call("cuDevicePrimaryCtxRetain", dev)
    call("cuCtxSetCurrent", ctx)
    mod = call("cuModuleLoad", pc.cubin_path().encode())
    fill = call("cuModuleGetFunction", mod, b"salus_fill")

    bufs = [call("cuMemAlloc", size) for size in pc.SIZES]
    held = sum(pc.SIZES)
    free, total = call("cuMemGetInfo")
    err, _ = cu.cuMemAlloc(pc.TOO_BIG)
    refused = int(err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY)
    if err not in (OK, cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
        pc.fail("cuMemAlloc(128 MiB): %s" % err)

    # The first buffer is zeroed from the host, then every one filled.
    host = np.zeros(pc.SIZES[0] // 4, dtype=np.float32)
    call("cuMemcpyHtoD", bufs[0], host.ctypes.data, host.nbytes)
    launches = 0
    for i in range(pc.LAUNCHES):
        buf, size = bufs[i % len(bufs)], pc.SIZES[i % len(bufs)]
        args = (np.array([int(buf)], dtype=np.uint64), np.array([pc.FILL], dtype=np.float32),
                np.array([size // 4], dtype=np.uint64))
        params = np.array([a.ctypes.data for a in args], dtype=np.uint64)
        blocks = (size // 4 + 255) // 256
        call("cuLaunchKernel", fill, blocks, 1, 1, 256, 1, 1, 0, 0, params.ctypes.data, 0)
        launches += 1
    call("cuStreamSynchronize", 0)
    call("cuMemcpyDtoH", host.ctypes.data, bufs[0], host.nbytes)
    if not np.all(host == pc.FILL):
        pc.fail("salus_fill left %s in the first buffer" % host[:4])
    call("cuCtxSynchronize")
    for buf in bufs:
        call("cuMemFree", buf)
    call("cuModuleUnload", mod)
    call("cuDevicePrimaryCtxRelease", dev)
    suffix = "_ptsz" if per_thread else ""
    pc.done(launches=launches, allocs=len(bufs), frees=len(bufs), bytes=held, refused=refused,
            view_free=int(free), view_total=int(total), view_held=held, kernel="salus_fill",
            launch_export="cuLaunchKernel" + suffix,
            copy_export="cuMemcpyDtoH_v2" + ("_ptds" if per_thread else ""))


if __name__ == "__main__":
    main()
