"""The report's paragraph on the paging rows run after run (training.json's
"swap_runs", repeats.py): each policy's median and spread with paging and
without, the goals in the median and in the worst run, and a word where
the runs disagree by more than the arrival orders alone explain."""
import statistics

from .report_fmt import f, table

# A policy's runs with paging disagree beyond their noise when their
# relative spread ((max - min) / median of the average JCT) is more than
# twice the spread of the same policy without paging on the same arrival
# orders (what the orders alone change) and more than this.
SPREAD_FLOOR = 0.10
# The goals (issue: paging that finishes every job, run after run).
SRTF_OVER_IDEAL = 1.15
SRTF_OVER_FIFO = 1.5
# Paging no slower than the same policy without it: by at most this much,
# a tolerance for the noise of one run (a judgement, not a measurement).
NO_WORSE = 1.05


def spread(values):
    """(median, min, max, relative spread) of the figures that exist."""
    v = [x for x in values if x is not None]
    if not v:
        return None, None, None, None
    m = statistics.median(v)
    return m, min(v), max(v), (max(v) - min(v)) / m if m else None


def cell(values, digits=2):
    m, lo, hi, _ = spread(values)
    if m is None:
        return "n/a"
    return f"{f(m, digits)} ({f(lo, digits)}-{f(hi, digits)})" if len(values) > 1 else f(m, digits)


def column(runs, policy, side, key):
    return [((e["policies"].get(policy) or {}).get(side) or {}).get(key) for e in runs]


def ratios(runs, num, den):
    """num / den per run, where both are figures: [(seed, ratio)]."""
    out = []
    for e in runs:
        a, b = num(e), den(e)
        if a is not None and b:
            out.append((e["arrival_seed"], a / b))
    return out


def judged(name, pairs, goal, larger_is_better):
    """'name: median x, worst y (seed s), met|not met' for per-run ratios."""
    if not pairs:
        return f"{name}: not measurable"
    vals = [r for _, r in pairs]
    worst = (min if larger_is_better else max)(pairs, key=lambda p: p[1])
    ok = all((r >= goal) if larger_is_better else (r <= goal) for r in vals)
    return (f"{name}: median {f(statistics.median(vals))}x, worst {f(worst[1])}x (arrival "
            f"seed {worst[0]}), " + ("met in every run" if ok else "not met"))


def policy_row(runs, p):
    paged = column(runs, p, "paging", "avg_jct_s")
    plain = column(runs, p, "plain", "avg_jct_s")
    rel = ratios(runs, lambda e: e["policies"][p]["paging"]["avg_jct_s"],
                 lambda e: e["policies"][p]["plain"]["avg_jct_s"])
    worst = max((r for _, r in rel), default=None)
    med = statistics.median([r for _, r in rel]) if rel else None
    failed = sum((x or 0) for x in column(runs, p, "paging", "failed_jobs"))
    failed_plain = sum((x or 0) for x in column(runs, p, "plain", "failed_jobs"))
    return [p, len(paged), cell(paged), cell(plain),
            f"{f(med)} ({f(worst)})" if med is not None else "n/a", failed, failed_plain]


def disagreements(runs, policies):
    out = []
    for p in policies:
        _, _, _, sp = spread(column(runs, p, "paging", "avg_jct_s"))
        _, _, _, sn = spread(column(runs, p, "plain", "avg_jct_s"))
        if sp is not None and sn is not None and sp > max(2 * sn, SPREAD_FLOOR):
            out.append(f"`{p}` with paging spreads {f(100 * sp, 0)}% of its median against "
                       f"{f(100 * sn, 0)}% without paging")
    return out


def section(tr):
    runs = tr.get("swap_runs") or []
    if len(runs) < 2:
        return ""
    policies = [p for p in runs[0]["policies"]]
    seeds = ", ".join(str(e["arrival_seed"]) for e in runs)
    out = [f"**Run after run.** The same jobs in {len(runs)} arrival orders (seeds {seeds}; "
           f"the first is the tables' above), each policy with paging and without: the "
           f"median of the runs' average JCT and, in brackets, their range.", "",
           table(["policy", "runs", "avg JCT s, paging", "avg JCT s, without paging",
                  "paging / without, median (worst)", "failed, paging (all runs)",
                  "failed, without"], [policy_row(runs, p) for p in policies]), ""]
    goals = [
        judged(f"`srtf` with paging over the ideal SRTF of its arrival order (goal <= "
               f"{f(SRTF_OVER_IDEAL)}x)",
               ratios(runs, lambda e: e["policies"]["srtf"]["paging"]["avg_jct_s"],
                      lambda e: e["ideal_srtf_jct_s"]), SRTF_OVER_IDEAL, False),
        judged(f"`fifo` over `srtf`, both with paging (goal >= {f(SRTF_OVER_FIFO, 1)}x)",
               ratios(runs, lambda e: e["policies"]["fifo"]["paging"]["avg_jct_s"],
                      lambda e: e["policies"]["srtf"]["paging"]["avg_jct_s"]),
               SRTF_OVER_FIFO, True)]
    worse = [p for p in policies
             if any(r > NO_WORSE for _, r in ratios(
                 runs, lambda e, p=p: e["policies"][p]["paging"]["avg_jct_s"],
                 lambda e, p=p: e["policies"][p]["plain"]["avg_jct_s"]))]
    goals.append(f"paging no slower than the same policy without it (by at most "
                 f"{f(100 * (NO_WORSE - 1), 0)}%), in every run: "
                 + ("met by every policy" if not worse else
                    "not met by " + ", ".join(f"`{p}`" for p in worse)))
    out.append("Goals, per run against the same arrival order: " + "; ".join(goals) + ".")
    d = disagreements(runs, policies)
    if d:
        out += ["", "Runs that disagree beyond what the arrival order explains: "
                + "; ".join(d) + "."]
    return "\n".join(out)
