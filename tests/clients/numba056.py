"""Numba 0.56 from Debian (python3-numba) over the driver named by
NUMBA_CUDA_DRIVER, for tests/test_clients.c.  Run with /usr/bin/python3.

Numba 0.56 binds each driver function by name with ctypes, preferring the
"_v2" export (driver.py, _find_api), with the prototypes of its own table
(drvapi.py).  Two exports gained a "_v2" with another prototype after it
was written: cuCtxGetDevice_v2(CUdevice *, CUcontext) and
cuCtxSynchronize_v2(CUcontext).  Numba calls them with its old one-argument
and no-argument prototypes, so the context argument is whatever the
register held and a CUDA 13 driver answers CUDA_ERROR_INVALID_CONTEXT: its
high-level API (cuda.to_device, kernels) cannot start.  The rest of its
binding is sound, and works through libsalus.

  python3 numba056.py <kernels.cubin> highlevel
      cuda.to_device, as users call it: prints {"error": <failing call>,
      "code": <CUresult>} and exits 3 when the driver refuses it (CUDA 13),
      pyclient's DID line with launches 0 when it works (CUDA 12).
  python3 numba056.py <kernels.cubin> binding
      pyclient's work through numba's own bindings (numba.cuda.cudadrv.driver),
      avoiding the two functions above: the workloads' PTX linked by numba's
      driver linker (cuLinkCreate_v2, cuLinkAddData_v2, cuLinkComplete,
      cuLinkDestroy), the cubin it makes loaded with cuModuleLoadDataEx,
      salus_fill launched with cuLaunchKernel (simgpu
      emulates it: the copy back is checked), allocations under the limit,
      cuMemGetInfo.
"""
import ctypes
import os

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import drvapi
from numba.cuda.cudadrv.driver import CtypesLinker, CudaAPIError, driver

import pyclient as pc

OUT_OF_MEMORY = 2


def highlevel():
    try:
        arr = cuda.to_device(np.ones(pc.SIZES[0] // 4, dtype=np.float32))
    except CudaAPIError as e:
        failing = str(e).split("Call to ")[-1].split(" ")[0]
        pc.done(error=failing, code=int(e.code))
        raise SystemExit(3)
    del arr
    pc.done(launches=0, allocs=1, frees=0, bytes=pc.SIZES[0])


def binding():
    dev = drvapi.cu_device()
    driver.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = drvapi.cu_context()
    driver.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    driver.cuCtxPushCurrent(ctx)
    # The workloads' PTX (beside their cubin) through numba's driver linker.
    linker = CtypesLinker()
    ptx = os.path.splitext(pc.cubin_path())[0] + ".ptx"
    linker.add_ptx(open(ptx, "rb").read(), os.path.basename(ptx))
    linked, linked_size = linker.complete()
    image = ctypes.string_at(linked, linked_size)
    mod = drvapi.cu_module()
    driver.cuModuleLoadDataEx(ctypes.byref(mod), image, 0, None, None)
    fill = drvapi.cu_function()
    driver.cuModuleGetFunction(ctypes.byref(fill), mod, b"salus_fill")

    bufs = []
    for size in pc.SIZES:
        ptr = drvapi.cu_device_ptr()
        driver.cuMemAlloc(ctypes.byref(ptr), size)
        bufs.append(ptr)
    held = sum(pc.SIZES)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    driver.cuMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    refused = 0
    try:
        driver.cuMemAlloc(ctypes.byref(drvapi.cu_device_ptr()), pc.TOO_BIG)
    except CudaAPIError as e:
        if e.code != OUT_OF_MEMORY:
            pc.fail("cuMemAlloc(128 MiB): %s" % e)
        refused = 1

    launches = 0
    for i in range(pc.LAUNCHES):
        buf, size = bufs[i % len(bufs)], pc.SIZES[i % len(bufs)]
        args = (ctypes.c_uint64(buf.value), ctypes.c_float(pc.FILL), ctypes.c_uint64(size // 4))
        params = (ctypes.c_void_p * 3)(*[ctypes.addressof(a) for a in args])
        driver.cuLaunchKernel(fill, (size // 4 + 255) // 256, 1, 1, 256, 1, 1, 0, None, params, None)
        launches += 1
    driver.cuStreamSynchronize(None)
    host = np.zeros(pc.SIZES[0] // 4, dtype=np.float32)
    driver.cuMemcpyDtoH(host.ctypes.data, bufs[0], host.nbytes)
    if not np.all(host == pc.FILL):
        pc.fail("salus_fill left %s in the first buffer" % host[:4])
    for buf in bufs:
        driver.cuMemFree(buf)
    driver.cuModuleUnload(mod)
    driver.cuCtxPopCurrent(ctypes.byref(drvapi.cu_context()))
    driver.cuDevicePrimaryCtxRelease(dev)
    pc.done(launches=launches, allocs=len(bufs), frees=len(bufs), bytes=held, refused=refused,
            view_free=free.value, view_total=total.value, view_held=held, kernel="salus_fill",
            launch_export="cuLaunchKernel", copy_export="cuMemcpyDtoH_v2", linked=linked_size)


if __name__ == "__main__":
    {"highlevel": highlevel, "binding": binding}[pc.mode("binding")]()
