"""What a run says: JCT statistics from the jobs' results, GPU busy time
and utilization from simgpu's kernel trace.

Utilization = GPU busy time / makespan, where busy time is the union of
the trace's kernel intervals (context-switch penalties and idle gaps are not
busy) and the makespan runs from the first arrival to the last completion.
"""
import json
import math


def percentile(values, q):
    """q-th percentile (0-100), linear between order statistics."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def mean(values):
    return sum(values) / len(values) if values else None


def iter_jsonl(path):
    """The objects of a JSON-lines file (the SALUS_REPORT, the kernel trace),
    read as they are used; bad lines skipped, none if it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    pass
    except OSError:
        return


def load_trace(path):
    """[(start_ns, end_ns, pid)] of the kernels (not copies or memsets),
    sorted by start; [] if there is none."""
    k = []
    for d in iter_jsonl(path):
        if d.get("kind", "kernel") != "kernel":
            continue
        try:
            k.append((int(d["start_ns"]), int(d["end_ns"]), int(d["pid"])))
        except (ValueError, KeyError):
            continue
    k.sort()
    return k


def union(intervals):
    """Merged [start, end) intervals of a start-sorted list of (s, e, ...)."""
    out = []
    for iv in intervals:
        s, e = iv[0], iv[1]
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def busy_ns(merged, lo=None, hi=None):
    t = 0
    for s, e in merged:
        if lo is not None:
            s, e = max(s, lo), min(e, hi)
        if e > s:
            t += e - s
    return t


def utilization_series(merged, t0, t1, bins=200):
    """[(t_s from t0, busy fraction)] over `bins` equal windows of [t0, t1)."""
    if t1 <= t0:
        return []
    w = (t1 - t0) / bins
    frac = [0.0] * bins
    for s, e in merged:
        s, e = max(s, t0), min(e, t1)
        if e <= s:
            continue
        for b in range(int((s - t0) // w), min(int((e - t0) // w), bins - 1) + 1):
            lo, hi = t0 + b * w, t0 + (b + 1) * w
            frac[b] += max(0.0, min(e, hi) - max(s, lo)) / w
    return [((i + 0.5) * w / 1e9, min(f, 1.0)) for i, f in enumerate(frac)]


def policy_stats(run):
    """The figures every policy object of summary.json has, and more."""
    res = run.results
    done = [r for r in res if r.ok]
    failed = [r for r in res if not r.ok]
    jcts = [r.jct_s for r in done]
    first = min(r.arrival_ns for r in res)
    last = max([r.end_ns for r in done] + [r.exit_ns for r in failed] + [first])
    kernels = load_trace(run.trace_path)
    merged = union(kernels)
    # One engine runs one kernel at a time: overlapping kernels mean the
    # simulated GPU was not one (its state was removed and made afresh).
    overlap = sum(e - s for s, e, _ in kernels) - sum(e - s for s, e in merged)
    busy = busy_ns(merged, first, last)
    span = last - first
    return {
        "avg_jct_s": mean(jcts),
        "p95_jct_s": percentile(jcts, 95),
        "makespan_s": span / 1e9,
        "utilization": busy / span if span > 0 else None,
        "failed_jobs": len(failed),
        "completed_jobs": len(done),
        "gpu_busy_s": busy / 1e9,
        "median_jct_s": percentile(jcts, 50),
        "kernels": len(kernels),
        "engine_overlap_s": overlap / 1e9,
    }, {"jcts": jcts, "merged": merged, "kernels": kernels, "t0": first, "t1": last}


def failures(run):
    """Why jobs failed: {reason: count} from their result lines."""
    out = {}
    for r in run.results:
        if r.ok:
            continue
        why = r.line.get("error") or ("killed" if r.killed else f"exit {r.rc}")
        why = "out of memory" if "OUT_OF_MEMORY" in why or "out of memory" in why.lower() else why
        err = r.stderr or ""
        if why == "out of memory" and ("PrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY" in err or
                                       "CtxCreate: CUDA_ERROR_OUT_OF_MEMORY" in err):
            why = "out of memory for its context"
        out[why[:80]] = out.get(why[:80], 0) + 1
    return out
