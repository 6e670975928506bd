"""The training section of the report: the trace under every policy, the
switching primitive with memory out of the picture, and the same trace with
paging (training_swap), with what the figures mean against the paper.
Every figure is read from training.json; see report.py."""
from . import config, report_repeats
from .report_fmt import PAPER, cmp_word, disturbed, f, ratio, table

TRAINING_KEYS = ["fifo", "srtf", "fair", "pack", "none", "ideal_srtf"]
SWAP_KEYS = ["fifo", "srtf", "fair", "pack"]
# The rows of the paging table: the policies, and srtf again with lengths
# declared in iterations only (training.py's SWAP_RUNS).
SWAP_ROWS = SWAP_KEYS + ["srtf_iterations"]
SWAP_LABELS = {"srtf_iterations": "srtf, iterations only"}


def section_training(tr, timing):
    P = tr["policies"]
    fifo, srtf, ideal = P["fifo"], P["srtf"], P["ideal_srtf"]
    out = ["## 1. Training: a trace of %d jobs" % tr["jobs"], ""]
    out.append(
        f"**Setup.** {tr['jobs']} jobs drawn (seed {tr['seed']}) uniformly from the paper's 45 "
        f"training workloads (15 models x 3 batch sizes, `salus-train --preset list`), each "
        f"sized to 1, 5 or 10 minutes of training as in the paper, then compressed "
        f"{tr['length_scale']}x in time: an iteration is shortened {tr['iter_scale']}x (the "
        f"model's own kernel lengths, {tr['iter_scale']}x fewer kernels), or less where it "
        f"would fall below {f(tr.get('min_iter_ms', 2.0), 0)} ms, and the job has as many "
        f"fewer iterations as make up the rest.  A job lasts {f(tr['mean_length_s'])} s alone on average "
        f"({f(tr['work_s'], 1)} s in all, {f(tr['gpu_work_s'], 1)} s of it GPU time).  "
        f"Poisson arrivals, mean gap {f(tr['mean_gap_s'], 3)} s: an offered load of "
        f"{f(tr['load'], 1)} while jobs arrive, so a queue forms, as in the paper's trace.  "
        f"Under every Salus policy a job declares its length (`SALUS_ITERATIONS`, and in time, "
        f"`SALUS_LENGTH_MS`: its class) and "
        f"reserves its peak memory (`SALUS_MEM_RESERVE`: it waits for admission instead of "
        f"failing; see below for how this differs from Salus's lanes); "
        f"`none` runs the same processes without libsalus.  JCT runs from arrival to "
        f"completion; utilization is GPU busy time in simgpu's kernel trace over the makespan.")
    out.append("")
    rows = []
    for pol in TRAINING_KEYS:
        st = P[pol]
        gain = f(ratio(fifo["avg_jct_s"], st["avg_jct_s"])) + "x"
        if st["failed_jobs"]:
            gain += " (survivors only)"
        rows.append([pol, f(st["avg_jct_s"]), f(st.get("median_jct_s")), f(st["p95_jct_s"]),
                     f(st["makespan_s"], 1), f(st["utilization"]), st["failed_jobs"], gain])
    out.append(table(["policy", "avg JCT s", "median s", "p95 s", "makespan s",
                      "utilization", "failed", "avg JCT gain over fifo"], rows))
    out.append("")
    w = disturbed([(p, P[p]) for p in config.POLICIES])
    if w:
        out += [w, ""]
    none, pack, fair = P["none"], P["pack"], P["fair"]
    U = tr.get("unbounded") or {}
    if U.get("fifo") and U.get("srtf"):
        out.append("**The switching primitive alone.** The same trace again under `fifo` and "
                   "`srtf` (and `fair`, for the paging rows below) with memory out of the "
                   "picture (a simulated GPU too large to fill, no reservations: every "
                   "arrived job is resident, as in the ideal):")
        out.append("")
        out.append(table(["policy, no memory limit", "avg JCT s", "p95 s", "makespan s",
                          "utilization", "failed"],
                         [[p, f(U[p]["avg_jct_s"]), f(U[p]["p95_jct_s"]),
                           f(U[p]["makespan_s"], 1), f(U[p]["utilization"]),
                           U[p]["failed_jobs"]] for p in ("fifo", "srtf", "fair") if U.get(p)]))
        out.append("")
    if tr.get("swap"):
        out += [section_training_swap(tr), ""]
        again = report_repeats.section(tr)
        if again:
            out += [again, ""]
    out += [training_meaning(tr), ""]
    sal = [(p, P[p].get("salus") or {}) for p in ("fifo", "srtf", "fair", "pack")]
    sw = ", ".join(f"{p} {s.get('switches', 'n/a')}" for p, s in sal)
    out.append(f"GPU handoffs between processes (SALUS_REPORT, summed over jobs): {sw}.")
    out.append("")
    pk = [j["peak_mib"] for j in tr["trace"]] or [0]
    out.append(
        "**Against the paper.** The paper's 3.19x rests on Salus keeping many jobs resident "
        "at once: a job waiting for the GPU holds only its persistent memory (weights, a few "
        "hundred MiB), and the jobs of a lane time-share one ephemeral region.  A transparent "
        "layer cannot tell persistent from ephemeral memory, and frameworks' caching "
        "allocators keep their peak anyway, so each of our time-sliced jobs holds its peak: "
        f"on a {f(tr.get('budget_gib'), 1)} GiB budget only a few of these jobs (peaks of "
        f"{f(min(pk) / 1024, 2)}-{f(max(pk) / 1024, 1)} GiB, {f(sum(pk) / len(pk) / 1024, 1)} "
        f"on average) are resident at once, "
        "admission goes in arrival order, and `srtf` can only choose among the few admitted.  "
        "Paging (above) lets every policy choose among more jobs, but not among all: each "
        "of our jobs is a process with a context of its own that paging cannot move, where "
        "the paper's jobs shared one process.  Preemption happens where an iteration ends (the lease changes hands at host "
        "synchronizations), as in Salus; compression makes an iteration a larger share of a "
        "job than in the paper (a 1-minute VGG job has a few iterations here, about 60 there), "
        "which coarsens preemption for the largest models.  Lengths are declared "
        "(`SALUS_ITERATIONS`) and iteration times measured by the scheduler, as Salus did.  "
        "Each compressed job still pays real fixed costs: process start-up, context creation, "
        "a synchronization of the context at every switch, and wake-up latencies of a few "
        "hundred microseconds per iteration on this host.")
    out.append("")
    return "\n".join(out)


def section_training_swap(tr):
    """The trace again with paging on (training.json's "swap")."""
    S, P = tr["swap"], tr["policies"]
    rows = []
    for p in SWAP_ROWS:
        st = S.get(p)
        if not st:
            continue
        pg = st.get("paging") or {}
        rows.append([SWAP_LABELS.get(p, p), f(st["avg_jct_s"]),
                     f(P.get(p, {}).get("avg_jct_s")),
                     f(st["makespan_s"], 1), f(st["utilization"]), st["failed_jobs"],
                     pg.get("swap_outs", 0), pg.get("swap_ins", 0),
                     f(pg.get("swap_bytes", 0) / 2**30, 1),
                     f(pg.get("swap_copied_bytes", 0) / 2**30, 1), f(pg.get("swap_s"), 1)])
    out = ["**With paging** (`SALUS_SWAP=on`, no reservations).  The same trace on the same "
           "budget: a job's context is admitted before it is made, in the policy's order, and "
           "a job that does not fit waits while the jobs the policy would run last are paged "
           "out to host memory, at simgpu's PCIe bandwidth:", "",
           table(["policy, paging", "avg JCT s", "avg JCT s without paging", "makespan s",
                  "utilization", "failed", "page-outs", "page-ins", "GiB paged",
                  "GiB copied", "s paging (summed)"], rows), "",
           "GiB paged: what left and came back to the device; GiB copied: what of it "
           "crossed PCIe (memory no work had reached since it was made, such as a job's "
           "per-iteration buffers allocated before the iteration's first launch, where it "
           "waits for the GPU, moves without a copy).  Jobs declare their length in "
           "iterations and in time, as their users would (`SALUS_LENGTH_MS`: the trace's "
           "class, 1, 5 or 10 minutes, compressed); `srtf, iterations only` is the same run "
           "with iterations alone.", ""]
    lost = [f"`{p}` {f(100 * S[p]['paging']['swap_s'] / S[p]['makespan_s'], 1)}%"
            for p in SWAP_KEYS if S.get(p) and (S[p].get("paging") or {}).get("swap_s")
            and S[p].get("makespan_s")]
    if lost:
        out.append("GPU time lost to paging is at most the copies' summed time (a page-in holds "
                   "the GPU, a page-out runs while its job waits): of the makespan, "
                   + ", ".join(lost) + ".")
        out.append("")
    pk = S.get("pack") or {}
    if pk.get("avg_jct_s"):
        outs = (pk.get("paging") or {}).get("swap_outs", 0)
        how = (f"its {outs} page-outs are jobs that paged themselves out when every job "
               f"holding memory waited for more (the last to arrive first, back in once the "
               f"others' memory came free)" if outs else
               "in this run no jobs waited for each other's memory (when they do, the last "
               "to arrive pages itself out and comes back once the others' memory is free: "
               "`test_memory_preempt`; before that rule one job in three runs was refused)")
        out.append(f"`pack` with paging runs every admitted job at once, so none waits at a "
                   f"gate to be asked to page out: {how}; {pk.get('failed_jobs', 0)} of its "
                   f"jobs failed.")
        out.append("")
    fair_text = swap_fair_text(tr)
    if fair_text:
        out += [fair_text, ""]
    ideal_jct = (P.get("ideal_srtf") or {}).get("avg_jct_s")
    srtf, fifo = (S.get("srtf") or {}).get("avg_jct_s"), (S.get("fifo") or {}).get("avg_jct_s")
    if srtf and ideal_jct and fifo:
        over = srtf / ideal_jct - 1.0
        gain = fifo / srtf
        out.append(f"Goals: `srtf` with paging within 15% of the offline ideal SRTF with every "
                   f"job resident ({f(ideal_jct)} s): {f(srtf)} s, {f(100 * over, 0)}% over, "
                   + ("met" if over <= 0.15 else "not met")
                   + f"; at least 1.5x better than `fifo` with paging: {f(gain)}x, "
                   + ("met" if gain >= 1.5 else "not met") + ".")
        out.append("")
        out.append(swap_gap_text(tr, srtf, ideal_jct))
    else:
        none = [f"`{p}`" for p, v in (("srtf", srtf), ("fifo", fifo)) if not v]
        out.append("Goals: not measurable: " + (" and ".join(none) + " finished no job with "
                                                 "paging." if none else "no ideal figure."))
    why = {}
    for p in SWAP_KEYS:
        for k, v in ((S.get(p) or {}).get("failures") or {}).items():
            why[k] = why.get(k, 0) + v
    if why:
        out.append("")
        largest = max([j.get("peak_mib", 0) for j in tr.get("trace") or []] or [0]) / 1024
        out.append(swap_failures_text(S, why, largest))
    return "\n".join(out)


def swap_fair_text(tr):
    """Why `fair` with paging is slower than `fair` with admission, where it
    is: the same policy with every job live, no paging at all."""
    paged = ((tr.get("swap") or {}).get("fair") or {}).get("avg_jct_s")
    plain = ((tr.get("policies") or {}).get("fair") or {}).get("avg_jct_s")
    live = ((tr.get("unbounded") or {}).get("fair") or {}).get("avg_jct_s")
    if not (paged and plain and live) or paged <= plain:
        return ""
    return (f"`fair` with paging averages {f(paged)} s against {f(plain)} s with admission; "
            f"with memory out of the picture, where nothing pages, it averages {f(live)} s.  "
            f"Fair shares the GPU among every job that is live, and under a queue processor "
            f"sharing ends each job late: admission keeps few jobs live (those whose peaks "
            f"fit), paging lets in as many as their contexts leave room for, and every job "
            f"live averages the most.  What paging's copies cost is the makespan's share "
            f"above.")


def swap_gap_text(tr, srtf, ideal_jct):
    """Where `srtf` with paging stands between the ideal and what bounds
    it: the offline model with contexts, the same policy with memory out
    of the picture, and lengths declared in iterations only."""
    S = tr.get("swap") or {}
    U = (tr.get("unbounded") or {}).get("srtf") or {}
    C = tr.get("ideal_srtf_contexts") or {}
    largest = max([j.get("peak_mib", 0) for j in tr.get("trace") or []] or [0]) / 1024
    budget = tr.get("budget_gib") or 0
    ctx = C.get("context_gib") or 0.5
    live = max(1, int((budget - largest) / ctx))       # contexts + the largest <= budget
    t = (f"Between the ideal ({f(ideal_jct)} s) and `srtf` with paging ({f(srtf)} s): the "
         f"ideal knows each job's exact length, ours its class; a job's context "
         f"({f(ctx * 1024, 0)} MiB on simgpu, as on a real GPU) cannot be paged, and "
         f"admission keeps room beside the contexts for a job as large as the largest seen "
         f"({f(largest, 1)} GiB of a {f(budget, 1)} GiB budget), so about {live} jobs are "
         f"live at once")
    if C.get("avg_jct_s"):
        t += (f"; the offline model with those contexts (admitted in SRTF order, paging free) "
              f"averages {f(C['avg_jct_s'])} s, so live jobs this few cost SRTF little on "
              f"this trace")
    if U.get("avg_jct_s"):
        t += (f"; with memory out of the picture (no limit, no contexts in the way) our "
              f"`srtf` averages {f(U['avg_jct_s'])} s, the rest being what starting and "
              f"running jobs costs on this host")
    t += "."
    it = (S.get("srtf_iterations") or {}).get("avg_jct_s")
    if it:
        t += (f"  With lengths declared in iterations only, `srtf` with paging averages "
              f"{f(it)} s: before a job has run, iterations are all admission can rank it "
              f"by, and a job of hundreds of short iterations waits behind jobs of a few "
              f"long ones (the largest models, which also leave the fewest contexts room).")
    return t


def swap_failures_text(S, why, largest_gib):
    """Why jobs failed with paging, each reason said only where it counted."""
    t = ("Why jobs failed with paging, over the four policies: "
         + ", ".join(f"{k} {v}" for k, v in sorted(why.items(), key=lambda x: -x[1])) + ".")
    ctx = why.get("out of memory for its context", 0)
    t += ("  Contexts are admitted before they are made: " +
          (f"{ctx} still failed in the driver, let through at the end of their admission's "
           "wait (`SALUS_MEM_WAIT_MS` at the head of the queue) with the device full."
           if ctx else "none failed for want of context memory."))
    bound = sum((S.get(p) or {}).get("paging", {}).get("host_bound_jobs", 0) for p in SWAP_KEYS)
    avail = max([(S.get(p) or {}).get("paging", {}).get("host_available", 0)
                 for p in SWAP_KEYS] or [0])
    if bound:
        t += (f"  {bound} jobs were asked to page out more than their host staging bound "
              "allowed (`SALUS_SWAP_LIMIT`, by default half the host's available memory: "
              f"{f(avail / 2**31, 1)} GiB on this host, against peaks of up to "
              f"{f(largest_gib, 1)} GiB per job in this trace); what they could not page stayed resident while they "
              "waited for the GPU, and they were asked no more.")
    oom = {p: ((S.get(p) or {}).get("failures") or {}).get("out of memory", 0) for p in SWAP_KEYS}
    if why.get("out of memory"):
        t += ("  'out of memory' (" + ", ".join(f"`{p}` {n}" for p, n in oom.items() if n)
              + "): an iteration's allocation waited `SALUS_MEM_WAIT_MS` for memory that "
              "paging could not free, and was refused.")
    if oom.get("pack"):
        t += ("  Under `pack` no job waits at a gate: jobs whose allocations wait for each "
              "other's memory page themselves out, the last to arrive first; a refusal there "
              "is a wait that no page-out could end (a job at its host staging bound, or one "
              "that could not fit beside the device's contexts).")
    if why.get("killed"):
        t += ("  'killed': the run's safety deadline (twice the trace's work, plus 60 s) ended "
              "jobs still waiting.")
    fair = (S.get("fair") or {}).get("failures") or {}
    if fair.get("killed"):
        t += ("  Under `fair` the jobs that do not fit together trade the GPU, and each trade "
              "pages the others out (the page-outs in the table; a holder keeps the GPU 8 "
              "times what the start of its turn cost): its jobs progress, slowly, and some "
              "are still running at the deadline.")
    return t


def training_meaning(tr):
    """The paragraph on what the training figures mean, each claim chosen by
    the figures: measured gains against the offline model's, per memory
    regime."""
    P = tr["policies"]
    fifo, srtf, ideal = P["fifo"], P["srtf"], P["ideal_srtf"]
    none, pack, fair = P["none"], P["pack"], P["fair"]
    U = tr.get("unbounded") or {}
    off_fifo = (tr.get("ideal_fifo") or {}).get("avg_jct_s")
    off_adm = (tr.get("ideal_srtf_admitted") or {}).get("avg_jct_s")
    g = ratio(fifo["avg_jct_s"], srtf["avg_jct_s"])            # measured, 16 GB
    a = ratio(off_fifo, ideal["avg_jct_s"])                     # offline, no memory limit
    b = ratio(off_fifo, off_adm)                                # offline, our admission
    c = ratio((U.get("fifo") or {}).get("avg_jct_s"), (U.get("srtf") or {}).get("avg_jct_s"))
    if g is None or g >= 1.005:
        said = f"improves the average JCT over `fifo` {f(g)}x"
    elif g >= 0.995:
        said = f"matches `fifo`'s average JCT ({f(g)}x)"
    else:
        said = f"is slower than `fifo` on average JCT, {f(g)}x"
    t = (f"**What it means.** `srtf` {said} (the paper: "
         f"{PAPER['jct']}x), {cmp_word(g, PAPER['jct'])} the paper's figure.  The offline model "
         f"of the same trace (one GPU, free switches, exact lengths) shows why: there SRTF beats "
         f"FIFO {f(a)}x when every arrived job is resident, but only {f(b)}x when each job must "
         f"first reserve its peak memory, in arrival order, as ours do on a "
         f"{f(tr.get('budget_gib'), 1)} GiB budget.  ")
    if c is not None:
        t += (f"Measured, the gain of our `srtf` over our `fifo` is {f(c)}x with memory out of "
              f"the picture and {f(g)}x under admission, ")
        close = a and b and abs(c - a) <= 0.15 * a and abs(g - b) <= 0.15 * b
        t += ("the offline model's gains in both regimes: iteration-boundary switching "
              "delivers what preemption can give on this trace, and memory residency is what "
              "separates it from the paper's figure.  " if close else
              "against the offline model's " + f(a) + "x and " + f(b) + "x: switching costs "
              "(context synchronization, handoffs, start-up of preempted jobs) and iteration "
              "granularity take part of the gain.  ")
    if off_fifo:
        t += (f"In absolute terms our `fifo` averages {f(fifo['avg_jct_s'])} s against the "
              f"model's {f(off_fifo)} s: every job start (admission, process, context, "
              f"allocations) and every iteration (host wake-ups) costs real time here.  ")
    if none["failed_jobs"]:
        peaks = {j["name"]: j["peak_mib"] for j in tr["trace"]}
        dead = [peaks[n] for n in none.get("failed_names", []) if n in peaks]
        alive = [v for n, v in peaks.items() if n not in set(none.get("failed_names", []))]
        t += (f"Without Salus (`none`) {none['failed_jobs']} of {tr['jobs']} jobs die out of "
              f"memory when their peaks meet; its averages and makespan are over the "
              f"{none.get('completed_jobs')} survivors")
        if dead and alive:
            t += (f" (peak {f(sum(alive) / len(alive) / 1024, 1)} GiB on average, against "
                  f"{f(sum(dead) / len(dead) / 1024, 1)} GiB for the dead)")
        t += ", which flatters it.  "
    else:
        t += "Without Salus (`none`) no job failed.  "
    failed_salus = [p for p in ("fifo", "srtf", "fair", "pack") if P[p]["failed_jobs"]]
    if failed_salus:
        which = ", ".join("%s %d" % (p, P[p]["failed_jobs"]) for p in failed_salus)
        t += f"Under Salus jobs failed too ({which}): see their errors in training.json.  "
    best = min(("fifo", "srtf", "fair", "pack"), key=lambda p: P[p]["avg_jct_s"] or 1e9)
    if best == "pack":
        t += (f"Under memory pressure our best policy for JCT is `pack` ({f(pack['avg_jct_s'])} "
              f"s, {f(ratio(fifo['avg_jct_s'], pack['avg_jct_s']))}x over `fifo`): it runs "
              f"every admitted job at once, so small jobs admitted beside a large one finish "
              f"early, and it fills the GPU while jobs do host work (utilization "
              f"{f(pack['utilization'])} against {f(fifo['utilization'])}).  ")
    else:
        t += (f"`pack` ({f(pack['avg_jct_s'])} s) runs every admitted job at once; utilization "
              f"{f(pack['utilization'])} against {f(fifo['utilization'])} for `fifo`.  ")
    t += (f"`fair` ({f(fair['avg_jct_s'])} s) equalizes progress rather than JCT: each job "
          f"shares the GPU with every admitted job, and each switch synchronizes a context.  ")
    spans = [P[p]["makespan_s"] for p in ("fifo", "srtf", "fair", "pack") if P[p]["makespan_s"]]
    if spans:
        t += (f"Under Salus makespans range {f(min(spans), 1)}-{f(max(spans), 1)} s for "
              f"{f(tr['gpu_work_s'], 1)} s of GPU work; the offline schedule needs "
              f"{f(ideal['makespan_s'], 1)} s.")
    return t
