"""PyCUDA over the driver, for tests/test_clients.c.

PyCUDA is built from its source distribution against the toolkit's headers
and linked to libcuda.so.1 (mk/venv.sh): its calls are direct calls into
the driver, which LD_PRELOAD puts libsalus in front of.  The work is
pyclient's, in a context of its own (make_context: cuCtxCreate): the
workloads' cubin loaded with module_from_buffer (cuModuleLoadDataEx) and
salus_fill launched over each buffer (simgpu emulates it: the copy back is
checked), then a kernel of its own compiled by SourceModule (nvcc to a cubin
for the device's architecture) launched over the same buffers, mem_alloc
under the limit and mem_get_info (the own view).

  python pycudaclient.py <kernels.cubin>
"""
import numpy as np
import pycuda.driver as drv
from pycuda.compiler import SourceModule

import pyclient as pc

SOURCE = """
__global__ void salus_pyscale(float *x, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}
"""


def main():
    drv.init()
    ctx = drv.Device(0).make_context()
    try:
        fill = drv.module_from_buffer(open(pc.cubin_path(), "rb").read()).get_function("salus_fill")
        scale = SourceModule(SOURCE).get_function("salus_pyscale")

        bufs = [drv.mem_alloc(size) for size in pc.SIZES]
        held = sum(pc.SIZES)
        free, total = drv.mem_get_info()
        refused = 0
        try:
            drv.mem_alloc(pc.TOO_BIG)
        except drv.MemoryError:
            refused = 2     # PyCUDA collects its garbage and tries once more

        launches = 0
        for i in range(pc.LAUNCHES):
            buf, size = bufs[i % len(bufs)], pc.SIZES[i % len(bufs)]
            n = size // 4
            kernel = fill if i < len(bufs) else scale
            kernel(buf, np.float32(pc.FILL), np.uint64(n), block=(256, 1, 1),
                   grid=((n + 255) // 256, 1))
            launches += 1
        host = np.zeros(pc.SIZES[-1] // 4, dtype=np.float32)
        drv.memcpy_dtoh(host, bufs[-1])     # filled, not scaled
        if not np.all(host == pc.FILL):
            pc.fail("salus_fill left %s in the last buffer" % host[:4])
        ctx.synchronize()
        for buf in bufs:
            buf.free()
    finally:
        ctx.pop()
        ctx.detach()
    pc.done(launches=launches, allocs=len(bufs), frees=len(bufs), bytes=held, refused=refused,
            view_free=free, view_total=total, view_held=held, kernel="salus_",
            launch_export="cuLaunchKernel", copy_export="cuMemcpyDtoH_v2")


if __name__ == "__main__":
    main()
