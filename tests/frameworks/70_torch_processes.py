"""PyTorch's own processes under libsalus: DataLoader workers, and
torch.multiprocessing passing a CUDA tensor to a child.

  dataloader: a training loop fed by a DataLoader with two worker processes
  (forked by a parent that has a CUDA context) and pinned memory; the job
  ends well, libsalus found its iterations, every kernel simgpu ran was the
  parent's and went through libsalus, and a batch copied to the device and
  back is the one the dataset made.
  multiprocessing: a parent writes a pattern into a CUDA tensor from the
  host and hands it to a spawned child through a torch.multiprocessing
  queue (CUDA IPC); the child reads the pattern and writes another from its
  host; the parent reads the child's bytes from the same tensor.  The child
  ran under libsalus too (its own report), and both processes ended well.
"""
import fwlib
from fwlib import check

N = 1 << 20


def pattern(seed):
    import torch
    return (torch.arange(N, dtype=torch.int64) * 2654435761 + seed) % 251


class Data:
    """Sixty-four samples made on the host, the same in every worker."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        import torch
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 16, 16, generator=g), i % 10


def child(q, back):
    import torch
    t = q.get(timeout=120)
    seen = bool(torch.equal(t.cpu(), pattern(1)))
    t.copy_(pattern(2).cuda())
    torch.cuda.synchronize()
    back.put(seen)
    q.get(timeout=120)                           # the parent has read: the tensor may go


def answer(back, p, seconds=180):
    """The child's answer; an end at once if it died instead."""
    import queue
    import sys
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            return back.get(timeout=0.5)
        except queue.Empty:
            if not p.is_alive():
                sys.exit("the child ended with %s before it answered" % p.exitcode)
    sys.exit("the child did not answer in %d s" % seconds)


def job(args):
    import torch
    import fwtorch
    if args[0] == "dataloader":
        t = fwtorch.Trainer(conv=False)
        loader = torch.utils.data.DataLoader(Data(), batch_size=16, num_workers=2,
                                             pin_memory=True, persistent_workers=True)
        ends, first_ok = [], None
        for epoch in range(4):
            for x, y in loader:
                t.x, t.y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                if first_ok is None:
                    first_ok = bool(torch.equal(t.x.cpu(), x))
                t.step()
                ends.append(fwlib.now_ns())
        fwlib.did(iterations=len(ends), first_ok=first_ok)
    else:
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        q, back = ctx.Queue(), ctx.Queue()
        t = pattern(1).cuda()
        # What the queue's feeder thread does to the tensor, here first: a
        # failure (no CUDA IPC handle) ends the job at once, not the child
        # after its wait.
        from torch.multiprocessing.reductions import reduce_tensor
        reduce_tensor(t)
        p = ctx.Process(target=child, args=(q, back))
        p.start()
        q.put(t)
        seen = answer(back, p)
        torch.cuda.synchronize()
        changed = bool(torch.equal(t.cpu(), pattern(2)))
        q.put("done")
        p.join(120)
        fwlib.did(child_pid=p.pid, child_rc=p.exitcode, child_saw=seen, parent_saw=changed)


def case_dataloader():
    run = fwlib.Run("loader")
    try:
        j = run.start("loader", ["dataloader"], {"SALUS_POLICY": "fair"})
        j.expect_ok(300)
        d, r = j.did(), j.report()
        check(d.get("iterations") == 16, "the job did %s iterations", d.get("iterations"))
        check(d.get("first_ok"), "a batch copied to the device came back changed")
        ks = run.kernels()
        others = {k["pid"] for k in ks} - {j.pid}
        check(not others, "kernels of other processes %s (the workers must not use CUDA)", others)
        check(r.get("launches") == len(ks), "libsalus counted %s launches, simgpu ran %d kernels",
              r.get("launches"), len(ks))
        check(r.get("iterations", 0) >= 8, "libsalus found %s iterations in 16", r.get("iterations"))
    finally:
        run.close()


def case_multiprocessing():
    run = fwlib.Run("mp")
    try:
        j = run.start("mp", ["mp"], {"SALUS_POLICY": "fair"})
        j.expect_ok(300)
        d = j.did()
        check(d.get("child_rc") == 0, "the child ended with %s", d.get("child_rc"))
        check(d.get("child_saw"), "the child did not read the parent's bytes through CUDA IPC")
        check(d.get("parent_saw"), "the parent did not read the child's bytes in its tensor")
        check(j.report(), "no report of the parent")
        check(fwlib.report_of(j.report_path, d["child_pid"]), "no report of the child: it ran "
              "without libsalus")
    finally:
        run.close()


if __name__ == "__main__":
    fwlib.main(job, [("torch_dataloader_workers", case_dataloader),
                     ("torch_multiprocessing_cuda_ipc", case_multiprocessing)])
