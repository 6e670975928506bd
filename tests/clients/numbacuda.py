"""numba-cuda over the driver, for tests/test_clients.c.

A @cuda.jit kernel compiled to PTX by the libNVVM of the nvidia-nvvm wheel,
linked to a cubin by cuda.core's Linker (nvJitLink of the nvidia-nvjitlink
wheel, in the process: with nvJitLink there, the driver's cuLink* is not
used), loaded and launched by numba-cuda through cuda.bindings
(cuLaunchKernelEx); the libraries it compiled and linked with are read from
/proc/self/maps and reported (nvvm, nvjitlink);
device arrays allocated under the limit (numba's own allocator: one
cuMemAlloc each), numba's view of memory (cuMemGetInfo), copies both ways,
and the frees that numba defers until its deallocation queue is flushed.
simgpu does not execute the kernel: it is checked on its calls (the test
reads them from the report and the trace), not on what it computes.

  python numbacuda.py <kernels.cubin>     (the cubin is not used)
"""
import gc
import os

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError

import pyclient as pc


@cuda.jit
def salus_scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


def mapped(name):
    """The path of the shared library name* this process has mapped, or ""."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(name):
                return path
    return ""


def main():
    pc.cubin_path()
    ctx = cuda.current_context()
    first = cuda.to_device(np.ones(pc.SIZES[0] // 4, dtype=np.float32))
    arrays = [first] + [cuda.device_array(size // 4, dtype=np.float32) for size in pc.SIZES[1:]]
    held = sum(pc.SIZES)
    free, total = ctx.get_memory_info()
    refused = 0
    try:
        cuda.device_array(pc.TOO_BIG // 4, dtype=np.float32)
    except CudaAPIError as e:
        if e.code != 2:     # CUDA_ERROR_OUT_OF_MEMORY
            pc.fail("device_array(128 MiB): %s" % e)
        # numba frees what it has queued and tries once more.
        refused = 2

    launches = 0
    for i in range(pc.LAUNCHES):
        x = arrays[i % len(arrays)]
        salus_scale[(x.size + 255) // 256, 256](x, np.float32(pc.FILL))
        launches += 1
    cuda.synchronize()
    first.copy_to_host()
    del first, arrays, x
    gc.collect()
    ctx.memory_manager.deallocations.clear()
    pc.done(launches=launches, allocs=len(pc.SIZES), frees=len(pc.SIZES), bytes=held,
            refused=refused, view_free=int(free), view_total=int(total), view_held=held,
            kernel="_ZN8__main__11salus_scale", launch_export="cuLaunchKernelEx",
            nvvm=mapped("libnvvm"), nvjitlink=mapped("libnvJitLink"))


if __name__ == "__main__":
    main()
