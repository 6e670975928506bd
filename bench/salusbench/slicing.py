"""Experiment 5: the GPU time that time slicing wastes.

Two identical salus-train jobs (8 ms of GPU per iteration: 10 salus_spin
kernels of 800 us, an item-like sync at the end) share one GPU, with a host
phase of 0, 10%, 20% and 50% of an iteration (--host-ms), under Salus fair
and without Salus (simgpu's own time slicing: its engine runs both
processes' kernels in submission order).  While one job computes on the
host, only the other's kernels can keep the GPU busy; a scheduler that
leaves the GPU with the job on the host wastes that time.

Per run: the makespan (first arrival to last completion, as the other
experiments) and the GPU-busy fraction (the union of simgpu's kernel
intervals over the span from the first kernel's start to the last kernel's
end, so that process start-up, the same with or without Salus, is not
counted as waste).  A loaded host makes runs noisy: the full scale repeats
each one and keeps the median.  Writes slicing.json:
{"shares": [{"host_share", "host_ms", "salus_makespan_s", "none_makespan_s",
"salus_busy", "none_busy", "salus_switches", "runs": {...}}], ...}.
"""
import json
import os

from . import analysis, config, runner
from .tracegen import Job

GPU_MS = 8.0                # GPU time per iteration
KERNELS = 10
SHARES = [0.0, 0.1, 0.2, 0.5]       # host time / iteration time; 0.2 is 2 ms
POLICIES = ["fair", "none"]
# iterations per job, repeats of each run
SIZES = {"full": (150, 3), "quick": (30, 1), "tiny": (3, 1)}
MEM = 64 * config.MiB


def host_ms(share):
    """The host phase that makes `share` of an iteration of GPU_MS of GPU."""
    return GPU_MS * share / (1.0 - share)


def jobs(share, iterations):
    """The two identical jobs, arriving together."""
    out = []
    for k in range(2):
        name = f"train{k}"
        args = ["--iterations", str(iterations), "--kernels", str(KERNELS), "--aux-kernels", "0",
                "--kernel-us", f"{GPU_MS * 1000 / KERNELS:g}", "--sync", "item",
                "--host-ms", f"{host_ms(share):.4f}", "--mem", str(MEM), "--name", name]
        out.append(Job(name=name, program="train", args=args, arrival_s=0.0,
                       iterations=iterations, gpu_s=iterations * GPU_MS / 1e3,
                       peak=2 * MEM))
    return out


def kernel_busy(trace_path):
    """GPU-busy fraction from the first kernel's start to the last one's end,
    and that span in seconds; (None, None) without kernels."""
    kernels = analysis.load_trace(trace_path)
    if not kernels:
        return None, None
    merged = analysis.union(kernels)
    lo, hi = merged[0][0], max(e for _, e in merged)
    return analysis.busy_ns(merged) / (hi - lo), (hi - lo) / 1e9


def one_run(share, policy, iterations, workdir, tag):
    r = runner.run_jobs(jobs(share, iterations), policy, workdir, tag,
                        deadline_s=60 + iterations * 0.5)
    st, _ = analysis.policy_stats(r)
    busy, span = kernel_busy(r.trace_path)
    ok = st["failed_jobs"] == 0
    out = {"makespan_s": st["makespan_s"] if ok else None, "busy": busy if ok else None,
           "kernel_span_s": span, "failed_jobs": st["failed_jobs"],
           "engine_overlap_s": st["engine_overlap_s"]}
    if policy != "none":
        rows = list(analysis.iter_jsonl(r.report_path))
        out["switches"] = sum(x.get("switches", 0) for x in rows) if rows else None
    return out


def median(values):
    v = [x for x in values if x is not None]
    return analysis.percentile(v, 50) if v else None


def run(scale, out_dir):
    iterations, repeats = SIZES.get(scale.name, SIZES["quick"])
    workdir = os.path.join(out_dir, "slicing")
    shares = []
    for share in SHARES:
        runs = {p: [] for p in POLICIES}
        for rep in range(repeats):
            for policy in POLICIES:         # interleaved: the host's load hits both alike
                tag = f"{policy}-{int(share * 100)}-{rep}"
                runs[policy].append(one_run(share, policy, iterations, workdir, tag))
        row = {"host_share": share, "host_ms": round(host_ms(share), 4)}
        for p in POLICIES:
            key = "salus" if p != "none" else "none"
            row[f"{key}_makespan_s"] = median(x["makespan_s"] for x in runs[p])
            row[f"{key}_busy"] = median(x["busy"] for x in runs[p])
        row["salus_switches"] = median(x.get("switches") for x in runs["fair"])
        row["runs"] = runs
        shares.append(row)
        print(f"bench: slicing host {share:.0%}: makespan fair {row['salus_makespan_s'] or 0:.3f}"
              f" s, none {row['none_makespan_s'] or 0:.3f} s; GPU busy fair "
              f"{row['salus_busy'] or 0:.3f}, none {row['none_busy'] or 0:.3f}", flush=True)
    result = {"scale": scale.name, "iterations": iterations, "repeats": repeats,
              "gpu_ms": GPU_MS, "kernels": KERNELS, "policies": POLICIES,
              "load": round(os.getloadavg()[0], 2), "shares": shares}
    with open(os.path.join(out_dir, "slicing.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
