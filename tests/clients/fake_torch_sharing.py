#!/usr/bin/env python3
"""A stand-in for bench/gpu/torch_sharing.py over simgpu, for
tests/test_gpucheck.c: the same commands, arguments, files and output lines,
without PyTorch.  What check.sh's sharing steps do around a framework
process (peers, barriers, SIGKILL, the driver's free memory, the reports)
runs for real; the framework's own work is the driver API through ctypes
(libcuda.so.1: simgpu, with libsalus preloaded by check.sh):

  spin     cuCtxSynchronize in a loop (the peer's syncs)
  graph    what torch.cuda.graph reports is not modelled: prints the fields
           of a capture that succeeded (the judgement is check.sh's)
  retain   cuMemAlloc and cuMemFree of N MiB: no pool keeps memory, so
           "reserved after free" is 0 and Salus's count must be back to 0
  take     cuMemAlloc of the view's free minus 1 GiB, the error if refused
  compile  cuLaunchKernelEx and cuLaunchKernel of salus_fill
           (CHECK_FAKE_CUBIN), as Triton and PyTorch launch
  loader   steps that sync, holding N MiB, with two fork()ed children that
           never use CUDA (DataLoader's workers) and exit with their parent
  probe    cuGetProcAddress_v2 of a few entry points, as the runtime asks
  ipc      cuMemAlloc of N MiB set to 1.0f, cuIpcGetMemHandle, a child
           (ipc-child) that opens the handle, checks 1.0f and sets 2.0f,
           then checks 2.0f here: torch.multiprocessing's CUDA IPC

CHECK_FAKE_BAD=COMMAND,... makes those commands report a result check.sh must
FAIL (the test shows that each judgement can fail).
"""
import argparse
import ctypes
import json
import os
import struct
import subprocess
import sys
import time

MIB = 1 << 20
BAD = set(os.environ.get("CHECK_FAKE_BAD", "").split(","))


def emit(**kw):
    print(json.dumps(kw), flush=True)


class Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.ok(self.lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self.ok(self.lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.ok(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "retain")
        self.ok(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    @staticmethod
    def ok(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUDA error {rc}")

    def view(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        fn = self.lib.cuMemGetInfo_v2
        fn.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        self.ok(fn(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value, total.value

    def alloc(self, n):
        """(0, pointer) or (error, None)."""
        p = ctypes.c_uint64()
        fn = self.lib.cuMemAlloc_v2
        fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        rc = fn(ctypes.byref(p), n)
        return (0, p.value) if rc == 0 else (rc, None)

    def free(self, p):
        fn = self.lib.cuMemFree_v2
        fn.argtypes = [ctypes.c_uint64]
        self.ok(fn(p), "cuMemFree")

    def sync(self):
        self.ok(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


def wait_file(path, seconds):
    end = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > end:
            return False
        time.sleep(0.01)
    return True


def cmd_spin(a):
    cu = Cuda()
    steps, t0 = 0, time.time()
    while time.time() - t0 < a.seconds and not (a.until and os.path.exists(a.until)):
        cu.sync()
        time.sleep(0.002)
        steps += 1
        if steps == 1:
            emit(event="spinning", pid=os.getpid())
    emit(pid=os.getpid(), steps=steps)


def cmd_graph(a):
    Cuda().sync()
    emit(captured=True, kernels=2 * a.kernels, replays=a.replays, same="graph" not in BAD)


def cmd_retain(a):
    cu = Cuda()
    f0, total = cu.view()
    rc, p = cu.alloc(a.mib * MIB)
    if rc:
        emit(error=f"cuMemAlloc: {rc}")
        return
    f1, _ = cu.view()
    cu.free(p)
    f2, _ = cu.view()
    held = a.mib * MIB if "retain" in BAD else 0     # a pool that kept it, uncounted
    emit(backend=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), mib=a.mib,
         reserved_held=a.mib * MIB, salus_held=f0 - f1,
         reserved_after_free=held, salus_after_free=f0 - f2, view_total=total)


def cmd_take(a):
    cu = Cuda()
    open(os.path.join(a.dir, f"ready.{a.index}"), "w").close()
    if not wait_file(os.path.join(a.dir, "go"), a.wait) or \
            (a.index > 0 and not wait_file(os.path.join(a.dir, f"took.{a.index - 1}"), a.wait)):
        emit(index=a.index, error="no go")
        return
    free, total = cu.view()
    ask = max(0, free - (1 << 30))
    if "six" in BAD and a.index == 5:
        rc, p = 2, None             # out of memory, and no refusal in the report
    else:
        rc, p = cu.alloc(ask) if ask else (0, None)
    free2, _ = cu.view()
    open(os.path.join(a.dir, f"took.{a.index}"), "w").close()
    emit(index=a.index, pid=os.getpid(), view_free=free, view_total=total, asked=ask,
         ok=rc == 0, error=None if rc == 0 else f"CUDA error {rc}", view_free_after=free2)
    wait_file(os.path.join(a.dir, "release"), a.wait)
    if p:
        cu.free(p)


class LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("nattrs", ctypes.c_uint)]


def cmd_compile(a):
    cu = Cuda()
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cu.ok(cu.lib.cuModuleLoad(ctypes.byref(mod), os.environ["CHECK_FAKE_CUBIN"].encode()), "load")
    cu.ok(cu.lib.cuModuleGetFunction(ctypes.byref(fn), mod, b"salus_fill"), "function")
    n = 1 << 16
    rc, buf = cu.alloc(4 * n)
    cu.ok(rc, "cuMemAlloc")
    dst, val, cnt = ctypes.c_uint64(buf), ctypes.c_float(1.5), ctypes.c_uint64(n)
    args = (ctypes.c_void_p * 3)(ctypes.addressof(dst), ctypes.addressof(val),
                                 ctypes.addressof(cnt))
    cfg = LaunchConfig((64, 1, 1), (256, 1, 1), 0, None, None, 0)
    steps = 0 if "compile" in BAD else a.steps
    for _ in range(steps):
        cu.ok(cu.lib.cuLaunchKernelEx(ctypes.byref(cfg), fn, args, None), "cuLaunchKernelEx")
        cu.ok(cu.lib.cuLaunchKernel(fn, 64, 1, 1, 256, 1, 1, 0, None, args, None), "cuLaunchKernel")
    cu.sync()
    cu.free(buf)
    emit(pid=os.getpid(), steps=a.steps, same=True, torch="none (test double)")


def cmd_loader(a):
    cu = Cuda()
    rc, ballast = cu.alloc(a.hold_mib * MIB)
    cu.ok(rc, "cuMemAlloc")
    parent = os.getpid()
    for _ in range(2):              # the workers: fork()ed, never touch CUDA
        if os.fork() == 0:
            while os.getppid() == parent:
                time.sleep(0.05)
            os._exit(0)
    rows, t0 = [], time.time()
    while True:
        cu.sync()
        time.sleep(0.01)
        free, total = cu.view()
        rows.append((time.time(), total - free))
        if len(rows) % 10 == 0 or time.time() - t0 > a.seconds or a.until:
            with open(a.out + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "rows": rows}, f)
            os.replace(a.out + ".tmp", a.out)
        if len(rows) == 1:
            emit(event="stepping", pid=os.getpid())
        if time.time() - t0 > a.seconds or (a.until and os.path.exists(a.until)):
            break
    cu.free(ballast)
    emit(pid=os.getpid(), steps=len(rows))


def cmd_probe(a):
    """The lookups the CUDA runtime makes first, through cuGetProcAddress_v2."""
    cu = Cuda()
    gpa = cu.lib.cuGetProcAddress_v2
    gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                    ctypes.c_uint64, ctypes.c_void_p]
    for name in (b"cuLaunchKernel", b"cuMemAlloc", b"cuCtxSynchronize", b"cuModuleLoad"):
        fn = ctypes.c_void_p()
        cu.ok(gpa(name, ctypes.byref(fn), 12000, 0, None), name.decode())
    emit(pid=os.getpid(), ok=True)


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def words(cu, p, n, value):
    """Whether the n bytes at device address p are all the float value."""
    buf = ctypes.create_string_buffer(n)
    fn = cu.lib.cuMemcpyDtoH_v2
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    cu.ok(fn(buf, p, n), "cuMemcpyDtoH")
    return buf.raw == struct.pack("<f", value) * (n // 4)


def set_words(cu, p, n, value):
    fn = cu.lib.cuMemsetD32_v2
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t]
    cu.ok(fn(p, struct.unpack("<I", struct.pack("<f", value))[0], n // 4), "cuMemsetD32")
    cu.sync()


def cmd_ipc(a):
    cu = Cuda()
    n = a.mib * MIB
    rc, p = cu.alloc(n)
    if rc:
        emit(error=f"cuMemAlloc: {rc}")
        return
    set_words(cu, p, n, 1.0)
    h = IpcHandle()
    fn = cu.lib.cuIpcGetMemHandle
    fn.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
    cu.ok(fn(ctypes.byref(h), p), "cuIpcGetMemHandle")
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "ipc-child",
                            "--mib", str(a.mib), "--handle", bytes(h).hex()],
                           capture_output=True, text=True, timeout=a.wait, check=False)
    lines = [l for l in child.stdout.splitlines() if l.startswith("{")]
    saw = json.loads(lines[-1]).get("saw") if lines else None
    sees = words(cu, p, n, 2.0) and "ipc" not in BAD
    cu.free(p)
    emit(mib=a.mib, swap=os.environ.get("SALUS_SWAP", ""), child_saw=saw, parent_sees=sees,
         child_exit=child.returncode)


def cmd_ipc_child(a):
    cu = Cuda()
    n = a.mib * MIB
    h = IpcHandle.from_buffer_copy(bytes.fromhex(a.handle))
    d = ctypes.c_uint64()
    fn = cu.lib.cuIpcOpenMemHandle_v2
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
    cu.ok(fn(ctypes.byref(d), h, 1), "cuIpcOpenMemHandle")
    saw = words(cu, d.value, n, 1.0)
    set_words(cu, d.value, n, 2.0)
    fn = cu.lib.cuIpcCloseMemHandle
    fn.argtypes = [ctypes.c_uint64]
    cu.ok(fn(d.value), "cuIpcCloseMemHandle")
    emit(saw=saw)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("spin")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--until")
    p = sub.add_parser("graph")
    p.add_argument("--kernels", type=int, default=25)
    p.add_argument("--replays", type=int, default=20)
    p = sub.add_parser("retain")
    p.add_argument("--mib", type=int, default=1024)
    p = sub.add_parser("take")
    p.add_argument("--dir", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--wait", type=float, default=120)
    p = sub.add_parser("compile")
    p.add_argument("--steps", type=int, default=20)
    p = sub.add_parser("loader")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--hold-mib", type=int, default=2048)
    p.add_argument("--out", required=True)
    p.add_argument("--until")
    sub.add_parser("probe")
    p = sub.add_parser("ipc")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--wait", type=float, default=60)
    p = sub.add_parser("ipc-child")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--handle", required=True)
    a = ap.parse_args()
    try:
        globals()["cmd_" + a.cmd.replace("-", "_")](a)
    except Exception as e:                               # noqa: BLE001
        emit(error=f"{type(e).__name__}: {e}"[:400])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
