"""NVIDIA's cuda-core (cuda.core) over the driver, for tests/test_clients.c.

cuda.core launches through cuLaunchKernelEx and allocates from the device's
memory pool (cuMemAllocFromPoolAsync, cuMemFreeAsync) on a stream of its
own.  The work is pyclient's: the cubin as an ObjectCode, salus_fill
launched over each buffer (simgpu emulates it: the bytes copied back are
checked), allocations under the limit; the own view and the copy back are
read through cuda.bindings, which cuda.core is built on.

  python cucore.py <kernels.cubin>
"""
import numpy as np
from cuda.bindings import driver as cu
from cuda.core import Device, LaunchConfig, ObjectCode, launch

import pyclient as pc


def main():
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    code = ObjectCode.from_cubin(open(pc.cubin_path(), "rb").read())
    fill = code.get_kernel("salus_fill")

    bufs = [dev.memory_resource.allocate(size, stream=stream) for size in pc.SIZES]
    held = sum(pc.SIZES)
    err, free, total = cu.cuMemGetInfo()
    if err != cu.CUresult.CUDA_SUCCESS:
        pc.fail("cuMemGetInfo: %s" % err)
    refused = 0
    try:
        dev.memory_resource.allocate(pc.TOO_BIG, stream=stream).close(stream)
    except Exception as e:  # cuda.core's CUDAError, named by the driver's error
        if "CUDA_ERROR_OUT_OF_MEMORY" not in str(e):
            pc.fail("allocate(128 MiB): %s" % e)
        refused = 1

    launches = 0
    for i in range(pc.LAUNCHES):
        buf, size = bufs[i % len(bufs)], pc.SIZES[i % len(bufs)]
        config = LaunchConfig(grid=(size // 4 + 255) // 256, block=256)
        launch(stream, config, fill, buf, np.float32(pc.FILL), np.uint64(size // 4))
        launches += 1
    stream.sync()
    host = np.zeros(pc.SIZES[0] // 4, dtype=np.float32)
    (err,) = cu.cuMemcpyDtoH(host.ctypes.data, int(bufs[0].handle), host.nbytes)
    if err != cu.CUresult.CUDA_SUCCESS or not np.all(host == pc.FILL):
        pc.fail("copy back: %s, %s" % (err, host[:4]))
    for buf in bufs:
        buf.close(stream)
    stream.sync()
    pc.done(launches=launches, allocs=len(bufs), frees=len(bufs), bytes=held, refused=refused,
            view_free=int(free), view_total=int(total), view_held=held, kernel="salus_fill",
            launch_export="cuLaunchKernelEx", alloc_export="cuMemAllocFromPoolAsync",
            free_export="cuMemFreeAsync")


if __name__ == "__main__":
    main()
