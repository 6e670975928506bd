"""nvidia-smi's table, from pynvml: what a job (or a monitor) sees of its GPU.

  pynvml_smi.py <MiB>

With <MiB> > 0 the process is a job first: it retains device 0's primary
context and allocates <MiB> through the driver (ctypes over libcuda.so.1,
as the CUDA runtime reaches it), and reads cuMemGetInfo.  Then, through
pynvml (NVIDIA's binding: it dlopens libnvidia-ml.so.1 and looks each
function up by name), it prints nvidia-smi's device and process table for
every GPU, and last one JSON line for test_nvml:

  program     "pynvml"
  cu_free, cu_total      cuMemGetInfo_v2 (0 for a monitor)
  total, free, used      nvmlDeviceGetMemoryInfo of device 0
  total2, free2, used2, reserved2   the same from nvmlDeviceGetMemoryInfo_v2
  procs       the pids of nvmlDeviceGetComputeRunningProcesses, sorted
  name, uuid, bus_id     device 0's identity
"""
import ctypes
import json
import sys

import pynvml

MIB = 1 << 20


def job(mib):
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(dev), 0)),
                       ("cuDevicePrimaryCtxRetain", (ctypes.byref(ctx), dev)),
                       ("cuCtxSetCurrent", (ctx,)),
                       ("cuMemAlloc_v2", (ctypes.byref(ptr), ctypes.c_size_t(mib * MIB))),
                       ("cuMemGetInfo_v2", (ctypes.byref(free), ctypes.byref(total)))):
        rc = getattr(cuda, call)(*args)
        if rc != 0:
            sys.exit("pynvml_smi: %s failed: CUresult %d" % (call, rc))
    return free.value, total.value


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def table():
    """nvidia-smi's layout, the columns pynvml can fill over any driver."""
    line = "+" + "-" * 77 + "+"
    print(line)
    print("| %-3s %-26s %-18s %-19s %5s |" % ("GPU", "Name", "Bus-Id", "Memory-Usage", "Util"))
    print(line.replace("-", "="))
    rows = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        m = pynvml.nvmlDeviceGetMemoryInfo(h)
        try:
            util = "%d%%" % pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        except pynvml.NVMLError:
            util = "N/A"
        usage = "%dMiB / %dMiB" % (m.used // MIB, m.total // MIB)
        print("| %3d %-26s %-18s %19s %5s |" % (i, text(pynvml.nvmlDeviceGetName(h))[:26],
                                              text(pynvml.nvmlDeviceGetPciInfo(h).busId),
                                              usage, util))
        rows += [(i, p) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    print(line)
    print("| %-61s %13s |" % ("Processes:", "GPU Memory"))
    print("| %-5s %-55s %13s |" % ("GPU", "PID", "Usage"))
    print(line.replace("-", "="))
    for i, p in rows:
        print("| %5d %-55d %10dMiB |" % (i, p.pid, p.usedGpuMemory // MIB))
    if not rows:
        print("| %-75s |" % " No running processes found")
    print(line)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: pynvml_smi.py <MiB>")
    mib = int(sys.argv[1])
    cu_free, cu_total = job(mib) if mib > 0 else (0, 0)
    pynvml.nvmlInit()
    table()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    procs = sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h))
    print(json.dumps({
        "program": "pynvml", "cu_free": cu_free, "cu_total": cu_total,
        "total": m.total, "free": m.free, "used": m.used,
        "total2": m2.total, "free2": m2.free, "used2": m2.used, "reserved2": m2.reserved,
        "procs": ",".join(str(p) for p in procs),
        "name": text(pynvml.nvmlDeviceGetName(h)), "uuid": text(pynvml.nvmlDeviceGetUUID(h)),
        "bus_id": text(pynvml.nvmlDeviceGetPciInfo(h).busId),
    }, separators=(",", ":")))
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
