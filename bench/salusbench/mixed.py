"""Experiment 4: a latency-sensitive service beside training.

One inference service (salus-infer, 20 requests/s of 2 ms of GPU each,
SALUS_LATENCY_MS=50 under Salus) shares one GPU with two training jobs
(salus-train, 10 ms of GPU per iteration, each about a third of the run's
length of GPU work), under every Salus policy and without Salus; and once
more under fair without SALUS_LATENCY_MS, to show what the variable does.
Per run: the service's p50 and p99 latency (arrival to completion,
queueing included) and the training jobs' average JCT.  Writes mixed.json:
{"policies": {policy: {"p50_ms", "p99_ms", "training_avg_jct_s", ...}}}.
"""
import json
import os

from . import config, runner
from .tracegen import Job

LATENCY_MS = 50
RATE = 20
POLICIES = ["fair", "priority", "srtf", "fifo", "pack", "none"]
SECONDS = {"full": 12.0, "quick": 4.0, "tiny": 1.0}


def jobs(seconds, latency):
    """Two training jobs, then the service 0.2 s later (training holds the GPU)."""
    iters = max(5, int(seconds * 1000 / 10 / 3))
    out = []
    for k in range(2):
        name = f"train{k}"
        args = ["--iterations", str(iters), "--kernels", "10", "--aux-kernels", "0",
                "--kernel-us", "1000", "--host-ms", "0.5", "--mem", str(512 * config.MiB),
                "--name", name]
        out.append(Job(name=name, program="train", args=args, arrival_s=0.01 * k,
                       iterations=iters, peak=640 * config.MiB))
    args = ["--rate", str(RATE), "--seconds", f"{seconds:g}", "--kernels", "2",
            "--aux-kernels", "0", "--kernel-us", "1000", "--mem", str(256 * config.MiB),
            "--seed", "4242", "--name", "service"]
    env = {"SALUS_LATENCY_MS": str(LATENCY_MS)} if latency else {}
    out.append(Job(name="service", program="infer", args=args, arrival_s=0.2,
                   peak=320 * config.MiB, env=env))
    return out


def stats(run):
    svc = next((r for r in run.results if r.job.name == "service"), None)
    jct = [r.jct_s for r in run.results if r.job.program == "train" and r.jct_s is not None]
    line = svc.line if svc else {}
    return {"p50_ms": line.get("latency_ms_p50"), "p99_ms": line.get("latency_ms_p99"),
            "requests": line.get("requests"),
            "training_avg_jct_s": sum(jct) / len(jct) if len(jct) == 2 else None,
            "training_done": len(jct), "service_ok": bool(svc and svc.ok)}


def run(scale, out_dir):
    seconds = SECONDS.get(scale.name, 4.0)
    workdir = os.path.join(out_dir, "mixed")
    result = {"scale": scale.name, "rate_rps": RATE, "latency_ms": LATENCY_MS,
              "seconds": seconds, "policies": {}}
    runs = [(p, p, True) for p in POLICIES] + [("fair-no-latency", "fair", False)]
    for key, policy, latency in runs:
        r = runner.run_jobs(jobs(seconds, latency), policy, workdir, key,
                            deadline_s=10 * seconds + 30)
        st = stats(r)
        result["policies"][key] = st
        print(f"bench: mixed {key}: service p50 {st['p50_ms'] or 0:.1f} ms, p99 "
              f"{st['p99_ms'] or 0:.1f} ms; training avg JCT "
              f"{st['training_avg_jct_s'] or 0:.2f} s", flush=True)
    with open(os.path.join(out_dir, "mixed.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
