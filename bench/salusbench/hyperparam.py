"""Experiment 2: hyper-parameter tuning.

Many jobs of one model, submitted at once, each with host time between its
iterations (the GPU is idle while a job loads data or runs Python).  One at
a time (fifo: the GPU is leased to one job until it exits) against pack
(every admitted job runs; memory admission bounds how many): utilization
from the kernel trace, makespan, average JCT.  Writes hyperparam.json.
"""
import json
import os

from . import analysis, presets, runner, tracegen

POLICIES = ["fifo", "pack"]


def run(scale, out_dir):
    pre = presets.load()
    workdir = os.path.join(out_dir, "hyperparam")
    sets, plot = [], {}
    for model in scale.hyper_models:
        p = pre[model]
        jobs = tracegen.hyper_jobs(scale, p)
        work = sum(j.length_s for j in jobs)
        entry = {"model": model, "jobs": len(jobs), "iterations": jobs[0].iterations,
                 "iter_ms": p.iter_ms, "host_ms": p.host_ms,
                 "gpu_fraction": p.iter_ms / (p.iter_ms + p.host_ms),
                 "peak_mib": jobs[0].peak >> 20, "job_length_s": jobs[0].length_s}
        for policy in POLICIES:
            r = runner.run_jobs(jobs, policy, workdir, f"{model}-{policy}",
                                deadline_s=4 * work + 60)
            st, raw = analysis.policy_stats(r)
            st["failures"] = analysis.failures(r)
            entry[policy] = st
            plot[f"{model}-{policy}"] = analysis.utilization_series(raw["merged"], raw["t0"],
                                                                     raw["t1"], bins=100)
            print(f"bench: hyperparam {model} {policy}: makespan {st['makespan_s']:.1f} s, "
                  f"utilization {st['utilization'] or 0:.2f}, failed {st['failed_jobs']}",
                  flush=True)
        f, k = entry["fifo"], entry["pack"]
        entry["utilization_gain"] = (k["utilization"] / f["utilization"]
                                     if f["utilization"] and k["utilization"] else None)
        entry["makespan_gain"] = (f["makespan_s"] / k["makespan_s"]
                                  if k["makespan_s"] and not k["failed_jobs"] else None)
        entry["bound_gain"] = 1.0 / entry["gpu_fraction"]
        sets.append(entry)
    out = {"scale": scale.name, "sets": sets,
           # the headline set: the first model (the paper's 2.38x came from packing
           # jobs that leave the GPU idle)
           "headline": sets[0]["model"] if sets else None}
    with open(os.path.join(out_dir, "hyperparam.json"), "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.join(out_dir, "hyperparam_plot.json"), "w") as f:
        json.dump(plot, f)
    return out
