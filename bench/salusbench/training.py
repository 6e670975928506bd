"""Experiment 1: a trace of training jobs under each policy.

The same jobs, at the same arrival times, run under fifo (no sharing: one
job owns the GPU until it exits), srtf, fair and pack through libsalus,
and under none (the same processes on simgpu without Salus: the engine
time-slices them and memory that does not fit fails the job).  The ideal
preemptive SRTF schedule of the trace, computed offline, is the limit.
Writes training.json (figures) and training_plot.json (what the plots need).
"""
import json
import os

from . import analysis, config, ideal, presets, repeats, runner, tracegen

TIMELINE_JOBS = 6
# libsalus's default budget: the capacity less a 5% headroom for contexts.
BUDGET = int(presets.parse_size(config.GPU_MEMORY) * 0.95)
# What a job's context takes on simgpu (SIMGPU_CTX_MEMORY's default).
CONTEXT = 512 * 2**20


def salus_counters(run):
    """Sums over the jobs' SALUS_REPORT lines: switches, time waited."""
    rows = list(analysis.iter_jsonl(run.report_path))
    if not rows:
        return {}
    h50 = [r["handoff_us_p50"] for r in rows if r.get("switches")]
    return {"reports": len(rows), "switches": sum(r.get("switches", 0) for r in rows),
            "waited_s": sum(r.get("waited_ms", 0.0) for r in rows) / 1e3,
            "handoff_us_p50_median": analysis.percentile(h50, 50) if h50 else None}


def timeline(kernels, results, first, start_s, span_s):
    """Merged kernel intervals of a few jobs over [start_s, start_s + span_s]
    after the first arrival: the jobs that used the GPU most in that window."""
    t0 = first + int(start_s * 1e9)
    t1 = t0 + int(span_s * 1e9)
    per = {}
    for s, e, pid in kernels:
        if s >= t1:
            break
        if e > t0:
            per.setdefault(pid, []).append((s, e))
    top = sorted(per, key=lambda p: -sum(e - s for s, e in per[p]))[:TIMELINE_JOBS]
    names = {r.line.get("pid"): r.job.name for r in results if r.line}
    out = []
    for pid in sorted(top, key=lambda p: per[p][0][0]):
        merged = analysis.union(per[pid])
        out.append({"job": names.get(pid, str(pid)),
                    "spans": [[(max(s, t0) - first) / 1e9, (min(e, t1) - max(s, t0)) / 1e9]
                              for s, e in merged]})
    return {"t0_s": start_s, "t1_s": start_s + span_s, "jobs": out}


# The policies with paging, and the variants beside them: (key, policy,
# whether jobs declare their lengths in time).  "srtf_iterations": the same
# srtf with lengths in iterations only, where admission cannot tell a job of
# many short iterations from one of few long ones.
SWAP_POLICIES = ("fifo", "srtf", "fair", "pack")
# Memory out of the picture: the switching primitive (fifo, srtf), and fair
# with every arrived job live, what it does with paging as more jobs
# become live at once (its processor sharing, not paging's copies).
UNBOUNDED_POLICIES = ("fifo", "srtf", "fair")
SWAP_RUNS = tuple((p, p, True) for p in SWAP_POLICIES) + (("srtf_iterations", "srtf", False),)


def swap_counters(run):
    """Sums over the jobs' SALUS_REPORT lines of what paging did."""
    rows = list(analysis.iter_jsonl(run.report_path))
    return {"swap_outs": sum(r.get("swap_outs", 0) for r in rows),
            "swap_ins": sum(r.get("swap_ins", 0) for r in rows),
            "swapped_out_bytes": sum(r.get("swapped_out_bytes", 0) for r in rows),
            "swap_bytes": sum(r.get("swap_bytes", 0) for r in rows),
            "swap_copied_bytes": sum(r.get("swap_copied_bytes", 0) for r in rows),
            "swap_s": sum(r.get("swap_ms", 0.0) for r in rows) / 1e3}


def host_available():
    """The host's MemAvailable in bytes (0: unknown): each paging job's
    default host staging bound is half of it."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_swap(jobs, work, workdir, plot, walls):
    """The same trace and budget with paging on (SALUS_SWAP=on), no
    reservations: a job that does not fit waits while the jobs the policy
    runs last are paged out, instead of waiting for admission."""
    out = {}
    for key, policy, lengths in SWAP_RUNS:
        # A tighter safety net than the other runs': a paging run that stalls
        # shows as failed jobs instead of holding the bench for many minutes.
        tag = f"{key.replace('_', '-')}-swap"
        r = runner.run_jobs(jobs, policy, workdir, tag, deadline_s=2 * work + 60,
                            reserve=False, extra_env={"SALUS_SWAP": "on"}, lengths=lengths)
        st, raw = analysis.policy_stats(r)
        st["failures"] = analysis.failures(r)
        st["salus"] = salus_counters(r)
        st["paging"] = swap_counters(r)
        # jobs asked to page out more than their host staging bound allowed
        st["paging"]["host_bound_jobs"] = sum(1 for x in r.results
                                              if "host staging bound" in (x.stderr or ""))
        st["paging"]["host_available"] = host_available()
        out[key] = st
        if lengths:
            plot["jct"][f"{policy} (paging)"] = raw["jcts"]
        walls[tag] = r.wall_s
        pg = st["paging"]
        print(f"bench: training {key}, paging: avg JCT {st['avg_jct_s'] or 0:.2f} s, "
              f"makespan {st['makespan_s']:.1f} s, failed {st['failed_jobs']}, "
              f"{pg['swap_outs']} page-outs, {pg['swap_copied_bytes'] / 2**30:.1f} GiB copied, "
              f"{pg['swap_s']:.1f} s paging ({r.wall_s:.0f} s)", flush=True)
    return out


def run(scale, out_dir):
    pre = presets.load()
    jobs, gen = tracegen.training_trace(scale, presets.training_presets(pre))
    work = sum(j.length_s for j in jobs)
    workdir = os.path.join(out_dir, "training")
    figures, plot = {}, {"jct": {}, "util": {}, "timeline": {}, "jobs": len(jobs)}
    walls = {}
    for policy in config.POLICIES:
        r = runner.run_jobs(jobs, policy, workdir, policy, deadline_s=6 * work + 60)
        st, raw = analysis.policy_stats(r)
        st["failures"] = analysis.failures(r)
        st["failed_names"] = [x.job.name for x in r.results if not x.ok]
        st["salus"] = salus_counters(r) if policy != "none" else {}
        figures[policy] = st
        walls[policy] = r.wall_s
        plot["jct"][policy] = raw["jcts"]
        plot["util"][policy] = analysis.utilization_series(raw["merged"], raw["t0"], raw["t1"])
        if policy in ("fair", "srtf", "none"):
            # the same window for each: from the arrival of a fifth of the jobs,
            # while the queue is long
            start = jobs[len(jobs) // 5].arrival_s
            plot["timeline"][policy] = timeline(raw["kernels"], r.results, raw["t0"], start,
                                                2.5 * gen["mean_length_s"])
        print(f"bench: training {policy}: avg JCT {st['avg_jct_s'] or 0:.2f} s, "
              f"makespan {st['makespan_s']:.1f} s, utilization {st['utilization'] or 0:.2f}, "
              f"failed {st['failed_jobs']} ({r.wall_s:.0f} s)", flush=True)
    # The switching primitive alone: memory out of the picture (a GPU too large
    # to fill, no reservations), so that srtf can pick among every job that
    # has arrived, as the ideal does.
    unbounded = {}
    if scale.unbounded:
        for policy in UNBOUNDED_POLICIES:
            r = runner.run_jobs(jobs, policy, workdir, f"{policy}-unbounded",
                                deadline_s=6 * work + 60, reserve=False,
                                extra_env={"SIMGPU_MEMORY": "1T"})
            st, raw = analysis.policy_stats(r)
            st["salus"] = salus_counters(r)
            unbounded[policy] = st
            plot["jct"][f"{policy} (no memory limit)"] = raw["jcts"]
            walls[f"{policy}-unbounded"] = r.wall_s
            print(f"bench: training {policy}, no memory limit: avg JCT "
                  f"{st['avg_jct_s'] or 0:.2f} s, makespan {st['makespan_s']:.1f} s "
                  f"({r.wall_s:.0f} s)", flush=True)
    swap = run_swap(jobs, work, workdir, plot, walls) if scale.swap else {}
    swap_runs = repeats.run(scale, presets.training_presets(pre), jobs, figures, swap, workdir,
                            walls)
    best, ideal_jct = ideal.stats(jobs)
    figures["ideal_srtf"] = best
    plot["jct"]["ideal_srtf"] = ideal_jct
    out = {
        "scale": scale.name,
        "jobs": len(jobs),
        "iter_scale": config.ITER_SCALE,
        "min_iter_ms": config.MIN_ITER_MS,
        "count_scale": scale.count_scale,
        "length_scale": config.ITER_SCALE * scale.count_scale,
        "load": scale.load,
        "mean_gap_s": gen["mean_gap_s"],
        "mean_length_s": gen["mean_length_s"],
        "work_s": work,
        "gpu_work_s": sum(j.gpu_s for j in jobs),
        "ideal_fifo": ideal.fifo_stats(jobs),
        "ideal_srtf_admitted": ideal.admitted_stats(jobs, BUDGET),
        "ideal_srtf_contexts": ideal.contexts_stats(jobs, BUDGET, CONTEXT),
        "budget_gib": BUDGET / 2**30,
        "policies": figures,
        "unbounded": unbounded,
        "swap": swap,
        "swap_runs": swap_runs,
        "wall_s": walls,
        "seed": scale.seed,
        "trace": [{"name": j.name, "model": j.model, "minutes": j.minutes,
                   "iterations": j.iterations, "arrival_s": round(j.arrival_s, 4),
                   "length_s": round(j.length_s, 4), "peak_mib": j.peak >> 20}
                  for j in jobs],
    }
    with open(os.path.join(out_dir, "training.json"), "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.join(out_dir, "training_plot.json"), "w") as f:
        json.dump(plot, f)
    return out
