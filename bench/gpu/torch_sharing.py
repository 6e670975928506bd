#!/usr/bin/env python3
"""The PyTorch processes of bench/gpu/check.sh's sharing steps (issue 11):
what a user's jobs do that simgpu cannot show.

  torch_sharing.py spin --seconds S [--until F]  a peer: matmuls, a sync each
                                                 step, until S pass or F exists
  torch_sharing.py graph --kernels N            capture N kernels in a CUDA graph
                                                 (torch.cuda.graph), replay, check
  torch_sharing.py retain --mib N               cudaMallocAsync keeps freed memory:
                                                 memory_reserved() vs Salus's count
  torch_sharing.py take --dir D --index I       load cuBLAS and cuDNN, wait for
                                                 D/go and D/took.<I-1>, take the
                                                 view's free - 1 GiB, hold until
                                                 D/release
  torch_sharing.py compile --steps N            a torch.compile function (Triton)
  torch_sharing.py loader --seconds S --out F [--until U]
                                                 training fed by a DataLoader with
                                                 num_workers=2 (fork), until S pass
                                                 or U exists; step stamps and the
                                                 view's used memory to F
  torch_sharing.py probe                         a few kernels (for the resolver log)
  torch_sharing.py ipc --mib N                   a CUDA tensor of N MiB shared with a
                                                 spawned process (torch.multiprocessing:
                                                 CUDA IPC), each side writing values
                                                 the other checks

Each prints one JSON line last (its figures; whether they pass is check.sh's
call), exits 0 when it ran, 3 when PyTorch or CUDA is missing, 1 on an
unexpected error.  The own view of memory is cuMemGetInfo through the
libcuda the process loaded (libsalus's answer when it is preloaded).
"""
import argparse
import ctypes
import json
import os
import sys
import time


def emit(**kw):
    print(json.dumps(kw), flush=True)


def view():
    """(free, total) of the process's own view, or (None, None)."""
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


def wait_file(path, seconds):
    end = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > end:
            return False
        time.sleep(0.01)
    return True


def cmd_spin(a):
    torch = need_torch()
    x = torch.randn(2048, 2048, device="cuda")
    steps, t0 = 0, time.time()
    while time.time() - t0 < a.seconds and not (a.until and os.path.exists(a.until)):
        y = x @ x
        y.sum().item()
        steps += 1
        if steps == 1:
            emit(event="spinning", pid=os.getpid())
    emit(pid=os.getpid(), steps=steps)


def cmd_graph(a):
    """Capture N small kernels (global capture mode, torch's default) while a
    peer shares the GPU; replay and compare with eager results."""
    torch = need_torch()
    x = torch.randn(1 << 16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                  # warm-up on a side stream, as the docs say
        y = x
        for _ in range(3):
            y = y * 1.0001 + 0.5
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    error = None
    try:
        with torch.cuda.graph(g):
            y = x
            for _ in range(a.kernels):
                y = y * 1.0001 + 0.5            # two kernels per step
    except Exception as e:                       # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
        emit(captured=False, error=error[:300])
        return
    expect = x.clone()
    for _ in range(a.kernels):
        expect = expect * 1.0001 + 0.5
    replays = 0
    for _ in range(a.replays):
        g.replay()
        replays += 1
    torch.cuda.synchronize()
    same = bool(torch.allclose(y, expect, rtol=1e-4, atol=1e-3))
    emit(captured=True, kernels=2 * a.kernels, replays=replays, same=same)


def cmd_retain(a):
    """With the cudaMallocAsync backend PyTorch sets the pool's release
    threshold to UINT64_MAX: a freed tensor's memory stays reserved by the
    pool.  Salus must count it: its used memory (total - free of the view)
    grows by memory_reserved() and stays after the free."""
    torch = need_torch()
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    f0, t0 = view()
    r0 = torch.cuda.memory_reserved()
    t = torch.empty(a.mib << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    f1, _ = view()
    r1 = torch.cuda.memory_reserved()
    del t
    torch.cuda.synchronize()
    f2, _ = view()
    r2 = torch.cuda.memory_reserved()
    if f0 is None:
        emit(error="cuMemGetInfo failed")
        return
    emit(backend=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), mib=a.mib,
         reserved_held=r1 - r0, salus_held=f0 - f1,
         reserved_after_free=r2 - r0, salus_after_free=f0 - f2, view_total=t0)


def cmd_take(a):
    """One of six: cuBLAS and cuDNN loaded (a matmul, a convolution), then,
    once all six are ready (D/go) and the one before has taken its share
    (D/took.<index - 1>), ask for the view's free memory minus 1 GiB and
    hold it until D/release.  A refusal by Salus and a failure in
    the driver both raise OutOfMemoryError; check.sh tells them apart with
    the SALUS_REPORT (oom_refusals)."""
    torch = need_torch()
    x = torch.randn(1024, 1024, device="cuda")
    (x @ x).sum().item()
    c = torch.nn.Conv2d(3, 16, 3).cuda()
    torch.backends.cudnn.enabled = True
    c(torch.randn(8, 3, 64, 64, device="cuda")).sum().item()
    open(os.path.join(a.dir, f"ready.{a.index}"), "w").close()
    if not wait_file(os.path.join(a.dir, "go"), a.wait) or \
            (a.index > 0 and not wait_file(os.path.join(a.dir, f"took.{a.index - 1}"), a.wait)):
        emit(index=a.index, error="no go")
        return
    free, total = view()
    ask = max(0, (free or 0) - (1 << 30))
    ok, error, held = True, None, None
    try:
        if ask:
            held = torch.empty(ask, dtype=torch.uint8, device="cuda")
            held[-1:].fill_(1)
            torch.cuda.synchronize()
    except Exception as e:                       # noqa: BLE001
        ok, error = False, f"{type(e).__name__}: {str(e)[:200]}"
    free2, _ = view()
    open(os.path.join(a.dir, f"took.{a.index}"), "w").close()
    emit(index=a.index, pid=os.getpid(), view_free=free, view_total=total, asked=ask,
         ok=ok, error=error, view_free_after=free2)
    wait_file(os.path.join(a.dir, "release"), a.wait)
    del held


def cmd_compile(a):
    torch = need_torch()

    def f(x, y):
        return torch.sin(x) * y + torch.cos(y) * x

    g = torch.compile(f)
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    ok = True
    for _ in range(a.steps):
        ok = ok and bool(torch.allclose(g(x, y), f(x, y), atol=1e-5))
    torch.cuda.synchronize()
    emit(pid=os.getpid(), steps=a.steps, same=ok, torch=torch.__version__)


class Batches:
    """A dataset made on the host, as real input pipelines are (workers
    never touch CUDA)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 64, 64, generator=g), int(i % 10)


def cmd_loader(a):
    torch = need_torch()
    from torch.utils.data import DataLoader
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(32 * 16, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    ballast = torch.empty(a.hold_mib << 20, dtype=torch.uint8, device="cuda")
    dl = DataLoader(Batches(1 << 20), batch_size=32, num_workers=2,
                    multiprocessing_context="fork")
    rows, t0 = [], time.time()
    for x, y in dl:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        torch.cuda.synchronize()
        free, total = view()
        rows.append((time.time(), (total - free) if free is not None else None))
        if len(rows) % 10 == 0 or time.time() - t0 > a.seconds or a.until:
            with open(a.out + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "rows": rows}, f)
            os.replace(a.out + ".tmp", a.out)
        if len(rows) == 1:
            emit(event="stepping", pid=os.getpid())
        if time.time() - t0 > a.seconds or (a.until and os.path.exists(a.until)):
            break
    del ballast
    emit(pid=os.getpid(), steps=len(rows))


def ipc_child(q, r):
    """The consumer: the producer's values, then its own."""
    import torch
    t = q.get()
    saw = bool((t == 1.0).all().item())
    t.fill_(2.0)
    torch.cuda.synchronize()
    r.put(saw)
    del t


def cmd_ipc(a):
    """torch.multiprocessing shares a CUDA tensor: cudaIpcGetMemHandle on the
    caching allocator's segment, cudaIpcOpenMemHandle in the consumer (with
    SALUS_SWAP=on, libsalus's own handles over the VMM API)."""
    torch = need_torch()
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q, r = ctx.Queue(), ctx.Queue()
    t = torch.full((a.mib * (1 << 20) // 4,), 1.0, device="cuda")
    torch.cuda.synchronize()
    p = ctx.Process(target=ipc_child, args=(q, r))
    p.start()
    q.put(t)
    try:
        saw = r.get(timeout=a.wait)
    except Exception:                                    # noqa: BLE001
        saw = None
    p.join(a.wait)
    torch.cuda.synchronize()
    sees = bool((t == 2.0).all().item())
    emit(mib=a.mib, swap=os.environ.get("SALUS_SWAP", ""), child_saw=saw, parent_sees=sees,
         child_exit=p.exitcode)


def cmd_probe(a):
    torch = need_torch()
    x = torch.randn(512, 512, device="cuda")
    (x @ x).sum().item()
    emit(pid=os.getpid(), ok=True)


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
    a = ap.parse_args()
    try:
        {"spin": cmd_spin, "graph": cmd_graph, "retain": cmd_retain, "take": cmd_take,
         "compile": cmd_compile, "loader": cmd_loader, "probe": cmd_probe,
         "ipc": cmd_ipc}[a.cmd](a)
    except SystemExit:
        raise
    except Exception as e:                               # noqa: BLE001
        emit(error=f"{type(e).__name__}: {e}"[:400])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
