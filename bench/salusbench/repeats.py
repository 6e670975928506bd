"""The training trace's paging rows, run after run.

One run per policy cannot tell a stable result from a lucky one (a rerun
of the paging rows once failed 79 of fair's 100 jobs where the published
run had failed none).  At full scale the training step runs each policy
with paging, and the same policy without it, again on the same jobs in
other arrival orders (Scale.swap_repeats runs in all, the first being the
main tables' own), so that the report can give each row's median and
spread and judge the goals in the median and in the worst run.  Comparing
a policy with paging to itself without paging within one arrival order
takes out what the order alone changes.

Writes nothing itself: training.json's "swap_runs" is its list.
"""
from . import analysis, ideal, runner, tracegen

# The policies whose paging row is repeated (training.SWAP_POLICIES; the
# iterations-only variant is the main run's alone).
POLICIES = ("fifo", "srtf", "fair", "pack")
# Arrival seeds of the repeats: far from scale.seed + 1, the main run's.
SEED_STEP = 100


def figures(r):
    """What the repeats keep of a run."""
    st, _ = analysis.policy_stats(r)
    return {"avg_jct_s": st["avg_jct_s"], "makespan_s": st["makespan_s"],
            "failed_jobs": st["failed_jobs"], "failures": analysis.failures(r)}


def first_entry(scale, jobs, policies, swap):
    """The main run as the first of the repeats."""
    best, _ = ideal.stats(jobs)
    return {"arrival_seed": scale.seed + 1, "ideal_srtf_jct_s": best["avg_jct_s"],
            "policies": {p: {"paging": {k: swap[p].get(k) for k in
                                        ("avg_jct_s", "makespan_s", "failed_jobs", "failures")},
                             "plain": {k: policies[p].get(k) for k in
                                       ("avg_jct_s", "makespan_s", "failed_jobs", "failures")}}
                         for p in POLICIES if p in swap and p in policies}}


def run_seed(scale, train_presets, seed, workdir, walls):
    """Every policy of POLICIES without and with paging on one arrival order."""
    jobs, _ = tracegen.training_trace(scale, train_presets, arrival_seed=seed)
    work = sum(j.length_s for j in jobs)
    best, _ = ideal.stats(jobs)
    entry = {"arrival_seed": seed, "ideal_srtf_jct_s": best["avg_jct_s"], "policies": {}}
    for p in POLICIES:
        tag = f"{p}-seed{seed}"
        plain = runner.run_jobs(jobs, p, workdir, tag, deadline_s=6 * work + 60)
        paged = runner.run_jobs(jobs, p, workdir, f"{tag}-swap", deadline_s=2 * work + 60,
                                reserve=False, extra_env={"SALUS_SWAP": "on"})
        walls[tag], walls[f"{tag}-swap"] = plain.wall_s, paged.wall_s
        e = entry["policies"][p] = {"plain": figures(plain), "paging": figures(paged)}
        print(f"bench: training {p}, arrival seed {seed}: avg JCT "
              f"{e['plain']['avg_jct_s'] or 0:.2f} s without paging, "
              f"{e['paging']['avg_jct_s'] or 0:.2f} s with, failed "
              f"{e['plain']['failed_jobs']} and {e['paging']['failed_jobs']} "
              f"({plain.wall_s + paged.wall_s:.0f} s)", flush=True)
    return entry


def run(scale, train_presets, jobs, policies, swap, workdir, walls):
    """The list of runs: the main one, then scale.swap_repeats - 1 more."""
    if not swap:
        return []
    runs = [first_entry(scale, jobs, policies, swap)]
    for k in range(1, scale.swap_repeats):
        runs.append(run_seed(scale, train_presets, scale.seed + 1 + k * SEED_STEP, workdir,
                             walls))
    return runs


def failed_runs(tr):
    """Every Salus run of training.json that failed jobs: ["what: n failed
    (why)"], empty when none did.  Any one fails `make bench`."""
    out = []

    def say(what, st):
        n = (st or {}).get("failed_jobs") or 0
        if n:
            why = ", ".join(f"{k} {v}" for k, v in ((st.get("failures") or {}).items()))
            out.append(f"{what}: {n} failed ({why or 'no reason recorded'})")

    for p, st in (tr.get("policies") or {}).items():
        if p not in ("none", "ideal_srtf"):
            say(f"training {p}", st)
    for p, st in (tr.get("unbounded") or {}).items():
        say(f"training {p} without memory limit", st)
    for p, st in (tr.get("swap") or {}).items():
        say(f"training {p} with paging", st)
    for e in (tr.get("swap_runs") or [])[1:]:
        for p, both in e["policies"].items():
            say(f"training {p}, arrival seed {e['arrival_seed']}", both.get("plain"))
            say(f"training {p} with paging, arrival seed {e['arrival_seed']}",
                both.get("paging"))
    return out
