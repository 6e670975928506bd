"""Experiment 3: inference services sharing one GPU.

Each service (salus-infer) serves batch-1 requests arriving as a Poisson
process; latency is arrival to completion, queueing included.  First each
model alone on a GPU of its own (the "one GPU each" baseline, all at once
on separate simulated GPUs); then 1, 2, 3, ... copies of every model on one
GPU, under Salus (pack: every admitted service runs, memory admission
queues the rest) and without it (none: simgpu time-slices, memory that
does not fit fails).  A configuration fits when every service was served
and every service's p99 latency is within the bound.  Writes
inference.json.
"""
import json
import math
import os

from . import analysis, presets, runner, tracegen

SALUS_POLICY = "pack"
TARGET_COPIES = 3           # the paper's 42 = 14 models x 3


def service_stats(run, slo_ms):
    rows = []
    for r in run.results:
        # A service stopped by the runner (SIGTERM: "interrupted") did not
        # serve its whole time: it waited for admission, or was killed there.
        late = bool(r.line.get("interrupted")) or r.killed
        ok = r.ok and not late
        why = None
        if not ok:
            why = (r.line.get("error") or
                   ("waited for admission, stopped" if late else f"exit {r.rc}"))
        rows.append({"name": r.job.name, "model": r.job.model, "ok": ok,
                     "served": r.line.get("requests"),
                     "p99_ms": r.line.get("latency_ms_p99"),
                     "p50_ms": r.line.get("latency_ms_p50"), "error": why})
    ok = [x for x in rows if x["ok"] and x["p99_ms"] is not None]
    p99 = [x["p99_ms"] for x in ok]
    return {
        "services": len(rows),
        "served": len(ok),
        "failed": len(rows) - len(ok),
        "p99_ms_max": max(p99) if p99 else None,
        "p99_ms_median": analysis.percentile(p99, 50) if p99 else None,
        "within_bound": sum(1 for v in p99 if v <= slo_ms),
        "fits": len(ok) == len(rows) and all(v <= slo_ms for v in p99),
        "errors": sorted({x["error"] for x in rows if x["error"]})[:5],
    }, rows


def run(scale, out_dir):
    pre = presets.load()
    services = presets.inference_services(pre)[:scale.infer_models]
    workdir = os.path.join(out_dir, "inference")
    slo = scale.infer_slo_ms
    stop = scale.infer_seconds + 3.0     # services end by themselves before this

    # One GPU each: every model alone, each on a simulated GPU of its own.
    alone_jobs = tracegen.inference_jobs(scale, services, 1, scale.infer_seconds, slo)
    for k, j in enumerate(alone_jobs):
        j.env = {"SIMGPU_STATE": f"/bench-{os.getpid()}-alone-{k}-gpu"}
    r = runner.run_jobs(alone_jobs, "none", workdir, "alone", stop_at_s=stop)
    alone, alone_rows = service_stats(r, slo)
    print(f"bench: inference alone: p99 max {alone['p99_ms_max'] or 0:.1f} ms", flush=True)

    sweep = []
    for copies in scale.infer_copies:
        jobs = tracegen.inference_jobs(scale, services, copies, scale.infer_seconds, slo)
        point = {"copies": copies, "services": len(jobs),
                 "memory_gib": sum(j.peak for j in jobs) / 2**30}
        for policy in (SALUS_POLICY, "none"):
            r = runner.run_jobs(jobs, policy, workdir, f"n{len(jobs)}-{policy}", stop_at_s=stop)
            st, _ = service_stats(r, slo)
            util, _ = analysis.policy_stats(r)
            st["utilization"] = util["utilization"]
            point["salus" if policy != "none" else "none"] = st
            print(f"bench: inference {len(jobs)} services {policy}: served {st['served']}, "
                  f"p99 max {st['p99_ms_max'] or 0:.1f} ms, fits {st['fits']}", flush=True)
        sweep.append(point)

    total = len(services) * TARGET_COPIES
    def best(key):
        ok = [p["services"] for p in sweep if p[key]["fits"]]
        return max(ok) if ok else 0
    result = {"scale": scale.name, "models": [s.model for s in services],
              "request_ms": {s.model: round(s.request_ms, 3) for s in services},
              "kernels": {s.model: s.kernels for s in services},
              "mem_mib": {s.model: s.mem >> 20 for s in services},
              "rate_rps": scale.infer_rate, "seconds": scale.infer_seconds,
              "p99_bound_ms": slo, "salus_policy": SALUS_POLICY,
              "alone": alone, "alone_services": alone_rows, "sweep": sweep,
              "target_services": total}
    for key in ("salus", "none"):
        n = best(key)
        result[f"{key}_max_services"] = n
        result[f"{key}_gpus_needed"] = math.ceil(total / n) if n else None
    result["one_gpu_each_gpus"] = total if alone["fits"] else None
    with open(os.path.join(out_dir, "inference.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
