"""Formatting for the report's sections: numbers, ratios, tables, the
words that compare a figure with the paper's, and the warning for disturbed
runs; the paper's figures and the micro-benchmarks' targets."""

PAPER = {"jct": 3.19, "hyper_util": 2.38, "infer_salus": 42, "infer_mps_gpus": 6}
TARGETS = {"launch_ns": 5, "pair_ns": 60, "handoff_p50_us": 10, "handoff_p99_us": 50}


def f(v, digits=2, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}{unit}"
    return f"{v}{unit}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def disturbed(named_stats):
    """A warning for runs whose one engine ran kernels side by side: the
    simulated GPU's state was removed under them and made afresh."""
    bad = [(n, st.get("engine_overlap_s") or 0) for n, st in named_stats]
    bad = [(n, v) for n, v in bad if v > 0.01]
    if not bad:
        return ""
    return ("**Warning: disturbed runs.** " + ", ".join(f"{n} ({f(v, 1)} s)" for n, v in bad)
            + ": kernels overlapped on the one simulated engine, which happens only when "
            "the run's simgpu state is removed while it runs (by something else on the "
            "machine).  Their figures are not to be trusted; rerun.\n")


def cmp_word(ours, paper, close=0.15):
    """How `ours` stands against `paper` (both ratios, larger is better)."""
    if ours is None:
        return "could not be measured"
    if abs(ours - paper) <= close * paper:
        return "close to"
    return "above" if ours > paper else "below"
