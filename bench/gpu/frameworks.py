#!/usr/bin/env python3
"""The framework parts of the real-GPU check (bench/gpu/check.sh).

  frameworks.py train   --steps N --out FILE   a small PyTorch training loop
  frameworks.py oom     --limit BYTES          an allocation over the limit
  frameworks.py account --mib N                libsalus's count vs PyTorch's
  frameworks.py jax                            JAX's preallocation

Each prints one JSON line (and `train` writes its step times to FILE);
exit 0 when the step ran (whether its figures pass is check.sh's call),
3 when the framework is missing, 1 on an unexpected error.  The process's
own view of memory comes from cuMemGetInfo, which libsalus answers (total =
the process's limit, free = what it could still allocate).
"""
import argparse
import ctypes
import json
import os
import sys
import time


def emit(**kw):
    print(json.dumps(kw), flush=True)


def driver_mem_info():
    """(free, total) from the driver API, through whatever libcuda the
    process loaded (libsalus's view when it is preloaded)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        fn = cuda.cuMemGetInfo_v2
        fn.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        if fn(ctypes.byref(free), ctypes.byref(total)) != 0:
            return None, None
        return free.value, total.value
    except (OSError, AttributeError):
        return None, None


def need_torch():
    try:
        import torch
    except ImportError:
        emit(skip="torch is not installed")
        sys.exit(3)
    if not torch.cuda.is_available():
        emit(skip="torch sees no CUDA device")
        sys.exit(3)
    return torch


def cmd_train(a):
    """A small convolutional network on random data: forward, backward,
    step, and loss.item() (a host sync) every step, as real loops do."""
    torch = need_torch()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(), torch.nn.Linear(64 * 64, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    stamps = []
    t0 = time.time()
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        loss.item()
        stamps.append(time.time())
    with open(a.out, "w") as f:
        json.dump({"pid": os.getpid(), "start": t0, "stamps": stamps}, f)
    emit(pid=os.getpid(), steps=len(stamps), seconds=stamps[-1] - t0 if stamps else 0)


def cmd_oom(a):
    """Ask for more than SALUS_MEM_LIMIT: PyTorch must raise its
    OutOfMemoryError (after emptying its cache and retrying), and the
    process must go on computing."""
    torch = need_torch()
    raised, kind = False, None
    try:
        big = torch.empty(int(a.limit * 1.5), dtype=torch.uint8, device="cuda")
        del big
    except torch.cuda.OutOfMemoryError as e:
        raised, kind = True, type(e).__name__
    except RuntimeError as e:           # older PyTorch: a RuntimeError
        raised, kind = "out of memory" in str(e).lower(), type(e).__name__
    ok_after = False
    try:
        t = torch.ones(64 << 20, device="cuda")          # 256 MiB
        ok_after = float(t.sum().item()) == float(64 << 20)
    except Exception as e:                               # noqa: BLE001
        kind = f"{kind}; after: {e}"
    emit(raised=raised, exception=kind, went_on=ok_after)


def cmd_account(a):
    """Hold about `mib` MiB of tensors; compare memory_reserved() with what
    libsalus counts (total - free of the process's view)."""
    torch = need_torch()
    base_free, base_total = driver_mem_info()
    keep = [torch.empty(32 << 20, dtype=torch.uint8, device="cuda") for _ in range(a.mib // 32)]
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    free, total = driver_mem_info()
    used = total - free if free is not None else None
    base_used = base_total - base_free if base_free is not None else 0
    emit(alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), tensors=len(keep),
         reserved=reserved, salus_used=used, salus_used_before=base_used, view_total=total)


def cmd_jax(a):
    """JAX preallocates XLA_PYTHON_CLIENT_MEM_FRACTION (0.75) of the memory
    cuMemGetInfo reports: under SALUS_MEM_LIMIT, of the limit."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        emit(skip="jax is not installed")
        sys.exit(3)
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        emit(skip="jax sees no GPU")
        sys.exit(3)
    jax.device_put(jnp.ones(1024), gpus[0]).block_until_ready()
    stats = {}
    try:
        stats = gpus[0].memory_stats() or {}
    except Exception:                                    # noqa: BLE001
        pass
    free, total = driver_mem_info()
    emit(bytes_limit=stats.get("bytes_limit"), bytes_reserved=stats.get("bytes_reserved"),
         view_total=total, view_used=(total - free) if free is not None else None,
         jax=jax.__version__)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--out", required=True)
    o = sub.add_parser("oom")
    o.add_argument("--limit", type=int, required=True)
    c = sub.add_parser("account")
    c.add_argument("--mib", type=int, default=2048)
    sub.add_parser("jax")
    a = ap.parse_args()
    try:
        {"train": cmd_train, "oom": cmd_oom, "account": cmd_account, "jax": cmd_jax}[a.cmd](a)
    except SystemExit:
        raise
    except Exception as e:                               # noqa: BLE001
        emit(error=f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
