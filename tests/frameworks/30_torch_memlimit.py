"""SALUS_MEM_LIMIT under PyTorch's three allocators: the caching allocator,
expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, the
driver's VMM) and the cudaMallocAsync backend (stream-ordered pools).

The job holds a tensor under the limit, asks for one over it, and goes on.
What must hold: the allocation over the limit raised
torch.cuda.OutOfMemoryError; Salus said on stderr that it refused it and
why (the limit by name) -- or, with expandable segments, which check
cudaMemGetInfo before they map, PyTorch refused it from Salus's view, the
limit as the GPU's capacity; the job then trained a step and moved bytes
through a tensor intact (written from the host, read back); libsalus
counted the refusals.  Under the caching allocator also its
retry-after-free: with a tensor freed to its cache, an allocation larger
than the own view's free memory, which fits only once the cache is given
back, succeeds after a refusal (torch's num_alloc_retries).
"""
import fwlib
from fwlib import MIB, check

LIMIT = 512 * MIB


def job(args):
    import torch
    import fwtorch
    held = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    raised, what = "", ""
    try:
        torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        raised, what = type(e).__name__, str(e).splitlines()[0]
    fwtorch.Trainer(conv=False).step()          # the job goes on
    del held                                    # to the cache, not the driver
    torch.cuda.synchronize()
    cached = torch.cuda.memory_reserved()
    # A size that fits the own view only once the cache is given back
    # (cuBLAS's own memory, outside the allocator, is in the view too).
    free, _ = torch.cuda.mem_get_info()
    size = (free + cached // 2) // (2 * MIB) * (2 * MIB)
    big = torch.empty(size, dtype=torch.uint8, device="cuda")
    pattern = torch.arange(1 << 20, dtype=torch.int32) * 2654435761 % 251
    big[:4 << 20].view(torch.int32).copy_(pattern)
    back = big[:4 << 20].view(torch.int32).cpu()
    stats = torch.cuda.memory_stats()
    fwlib.did(raised=raised, what=what, cached=cached, free=free, size=size,
              intact=bool(torch.equal(back, pattern)),
              retries=stats.get("num_alloc_retries", -1))


def limit_case(name, conf, retry, view_first=False):
    run = fwlib.Run(name)
    try:
        env = {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20)}
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        j = run.start("torch", [], env)
        j.expect_ok(300)
        d, r, err = j.did(), j.report(), j.err()
        check(d.get("raised") == "OutOfMemoryError",
              "an allocation of 1 GiB over a 512 MiB limit raised %r", d.get("raised"))
        if view_first:
            # Expandable segments weigh a request against cudaMemGetInfo
            # before they map: PyTorch refuses it itself, from Salus's view
            # (the limit is the GPU's whole capacity), and the driver is
            # never asked.
            check("total capacity of %d.00 MiB" % (LIMIT >> 20) in d.get("what", ""),
                  "PyTorch's refusal does not name the limit as the capacity: %r", d.get("what"))
        else:
            check("memory: refused" in err and "SALUS_MEM_LIMIT" in err,
                  "Salus did not say on stderr that it refused the allocation at SALUS_MEM_LIMIT")
            check(r.get("oom_refusals", 0) >= 1, "libsalus counted %s refusals",
                  r.get("oom_refusals"))
        check(d["intact"], "bytes written from the host came back changed after the refusal")
        check(r.get("mem_limit_bytes") == LIMIT, "the report's limit is %s", r.get("mem_limit_bytes"))
        if retry:
            check(d["cached"] >= 256 * MIB, "the freed tensor was not cached (%d reserved)", d["cached"])
            check(d["size"] > d["free"], "%d bytes fit the %d free without a retry", d["size"], d["free"])
            check(d["retries"] >= 1, "the allocator never retried after freeing its cache")
    finally:
        run.close()


def case_caching():
    limit_case("limit-caching", "", True)


def case_expandable():
    limit_case("limit-expandable", "expandable_segments:True", False, view_first=True)


def case_async():
    limit_case("limit-async", "backend:cudaMallocAsync", False)


if __name__ == "__main__":
    fwlib.main(job, [("torch_limit_caching", case_caching),
                     ("torch_limit_expandable_segments", case_expandable),
                     ("torch_limit_cudaMallocAsync", case_async)])
