"""report.md and summary.json, from the experiments' JSON of one directory.

Every figure in the report is read from this run's files; the prose around
a figure only chooses its words from the figure (better / worse, within /
outside).  The fixed text says what the experiments model and what they do
not.  With scale.publish (make bench), the report is also copied to
bench/REPORT.md with its plots in bench/report/, the copy the README links.

Divided into: loading and summary.json; one section writer per experiment
(training's in report_training.py, the formatting in report_fmt.py); the
assembly; the summary check used by tests.
"""
import json
import os
import platform
import shutil
import time

from . import config, plots, presets, repeats
from .report_fmt import PAPER, TARGETS, cmp_word, disturbed, f, ratio, table  # noqa: F401
from .report_training import SWAP_KEYS, TRAINING_KEYS, section_training  # noqa: F401
from .report_pytorch import check_pytorch, section_pytorch, summary_pytorch

POLICY_KEYS = ["avg_jct_s", "p95_jct_s", "makespan_s", "utilization", "failed_jobs"]
MIXED_KEYS = ["p50_ms", "p99_ms", "training_avg_jct_s"]
SLICING_KEYS = ["host_share", "salus_makespan_s", "none_makespan_s", "salus_busy", "none_busy"]
SUMMARY_KEYS = ["training", "training_swap", "hyperparam", "inference", "mixed", "slicing",
                "pytorch",
                "overhead_ns_per_launch",
                "overhead_ns_per_launch_contended", "overhead_ns_per_launch_two_devices",
                "alloc_ns_per_pair", "handoff_us"]


# ---- loading and summary.json ----------------------------------------------

def results(out_dir):
    """The training, hyperparam, inference and micro JSON of out_dir (each
    None when missing)."""
    return [config.load_json(out_dir, f"{step}.json")
            for step in ("training", "hyperparam", "inference", "micro")]


def infer_figures(inf):
    """Target, largest fitting count and GPUs needed, from the sweep (the
    paper's target: 3 services of each model)."""
    n = len(inf["models"]) * 3
    out = {"services": n, "one_gpu_each_gpus": n if inf["alone"]["fits"] else None}
    for key in ("salus", "none"):
        fit = [p["services"] for p in inf["sweep"] if p[key]["fits"]]
        m = max(fit) if fit else 0
        out[f"{key}_max_services"] = m
        out[f"{key}_gpus_needed"] = -(-n // m) if m else None
    return out


def summary(tr, hp, inf, mi, mx=None, sl=None, pt=None):
    training = {}
    for k in TRAINING_KEYS:
        src = (tr or {}).get("policies", {}).get(k, {})
        training[k] = {key: src.get(key) for key in POLICY_KEYS}
    hyper = {}
    if hp and hp.get("sets"):
        h = hp["sets"][0]
        hyper = {"model": h["model"], "jobs": h["jobs"],
                 "fifo": {k: h["fifo"].get(k) for k in POLICY_KEYS},
                 "pack": {k: h["pack"].get(k) for k in POLICY_KEYS},
                 "utilization_gain": h["utilization_gain"], "makespan_gain": h["makespan_gain"],
                 "others": [{"model": s["model"], "utilization_gain": s["utilization_gain"],
                             "makespan_gain": s["makespan_gain"]} for s in hp["sets"][1:]]}
    infer = {}
    if inf:
        fi = infer_figures(inf)
        infer = {"services": fi["services"], "p99_bound_ms": inf["p99_bound_ms"],
                 "salus_max_services": fi["salus_max_services"],
                 "salus_gpus_needed": fi["salus_gpus_needed"],
                 "none_max_services": fi["none_max_services"],
                 "none_gpus_needed": fi["none_gpus_needed"],
                 "one_gpu_each_gpus": fi["one_gpu_each_gpus"]}
    fig = (mi or {}).get("figures", {})
    mixed = {pol: {k: st.get(k) for k in MIXED_KEYS}
             for pol, st in ((mx or {}).get("policies") or {}).items()}
    slicing = [{k: row.get(k) for k in SLICING_KEYS} for row in (sl or {}).get("shares") or []]
    swap = {k: {key: st.get(key) for key in POLICY_KEYS}
            for k, st in ((tr or {}).get("swap") or {}).items()}
    return {"training": training, "training_swap": swap, "hyperparam": hyper,
            "inference": infer, "mixed": mixed,
            "slicing": slicing,
            "pytorch": summary_pytorch(pt),
            "overhead_ns_per_launch": fig.get("overhead_ns_per_launch"),
            "overhead_ns_per_launch_contended": fig.get("overhead_ns_per_launch_contended"),
            "overhead_ns_per_launch_two_devices": fig.get("overhead_ns_per_launch_two_devices"),
            "alloc_ns_per_pair": fig.get("alloc_ns_per_pair"),
            "handoff_us": {"p50": fig.get("handoff_us_p50"), "p99": fig.get("handoff_us_p99")}}


def check_summary(path):
    """Problems with a summary.json ([] when it has every key)."""
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        return [f"unreadable: {e}"]
    if not isinstance(s, dict):
        return ["not an object"]
    p = [f"missing key {k}" for k in SUMMARY_KEYS if k not in s]
    p += [f"unexpected key {k}" for k in s if k not in SUMMARY_KEYS]
    tr = s.get("training")
    if not isinstance(tr, dict):
        return p + ["training is not an object"]
    for pol in TRAINING_KEYS:
        o = tr.get(pol)
        if not isinstance(o, dict):
            p.append(f"training.{pol} missing")
            continue
        p += [f"training.{pol}.{k} missing" for k in POLICY_KEYS if k not in o]
    sw = s.get("training_swap")
    if not isinstance(sw, dict):
        p.append("training_swap is not an object")
    elif sw:
        for pol in SWAP_KEYS:
            o = sw.get(pol)
            if not isinstance(o, dict):
                p.append(f"training_swap.{pol} missing")
                continue
            p += [f"training_swap.{pol}.{k} missing" for k in POLICY_KEYS if k not in o]
    for k in ("hyperparam", "inference", "mixed"):
        if not isinstance(s.get(k), dict) or not s.get(k):
            p.append(f"{k} is not a non-empty object")
    for pol, o in (s.get("mixed") or {}).items():
        if not isinstance(o, dict) or any(k not in o for k in MIXED_KEYS):
            p.append(f"mixed.{pol} lacks one of {', '.join(MIXED_KEYS)}")
    p += check_slicing(s.get("slicing"))
    p += check_pytorch(s.get("pytorch"))
    h = s.get("handoff_us")
    if not isinstance(h, dict) or "p50" not in h or "p99" not in h:
        p.append("handoff_us lacks p50/p99")
    for k in ("overhead_ns_per_launch", "overhead_ns_per_launch_contended",
              "overhead_ns_per_launch_two_devices", "alloc_ns_per_pair"):
        if k in s and s[k] is not None and not isinstance(s[k], (int, float)):
            p.append(f"{k} is not a number")
    return p


def check_slicing(rows):
    """Problems with summary.json's slicing list: a non-empty list of rows
    of SLICING_KEYS, each a number (null where a run failed)."""
    if not isinstance(rows, list) or not rows:
        return ["slicing is not a non-empty list"]
    p = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            p.append(f"slicing[{i}] is not an object")
            continue
        p += [f"slicing[{i}].{k} missing" for k in SLICING_KEYS if k not in row]
        p += [f"slicing[{i}].{k} is not a number" for k in SLICING_KEYS
              if row.get(k) is not None and not isinstance(row[k], (int, float))]
    return p


# ---- sections -------------------------------------------------------------------

SIMGPU_TEXT = """\
**What simgpu models.** One compute engine per GPU shared by every process of
a state: kernels of all processes run one at a time, in submission order,
for their declared duration (`salus_spin` lasts its argument), with a
context-switch penalty (`SIMGPU_CTX_SWITCH_US`, 100 us, measured on an A100)
whenever consecutive kernels belong to different contexts; memory capacity
(16 GiB here, the paper's P100) charged per allocation, with
`CUDA_ERROR_OUT_OF_MEMORY` when full; copies at PCIe and HBM bandwidth;
a CUDA context's own memory (`SIMGPU_CTX_MEMORY`, 512 MiB); synchronization
that waits until the GPU work is done (sleeping, then spinning its last
200 us as the driver's default wait does); one JSON trace line per kernel,
copy and memset.  The processes are the real workload programs, the real
libsalus (interposition, lease, futex handoffs, memory accounting), the real
kernel scheduler of the host.

**What it does not model.** Concurrent kernels (no spatial sharing of SMs:
a GPU running two small jobs' kernels side by side is faster than running
them one after the other; simgpu is not), so packing helps only by filling
the idle gaps between a job's iterations; GPU time-slice preemption inside a
kernel (the real hardware switches contexts every ~1 ms; simgpu switches
between kernels); PCIe contention, caches, clocks, thermal limits; the framework (TensorFlow in the paper) above the driver.  The
workloads are models of jobs: iteration time, kernel count, memory and host
time from the presets table, not the networks themselves.
"""


def section_hyper(hp):
    out = ["## 2. Hyper-parameter tuning", ""]
    sets = hp["sets"]
    h = sets[0]
    out.append(
        f"**Setup.** {h['jobs']} jobs of one model submitted together, each "
        f"{f(h['job_length_s'])} s long alone at the model's real iteration time "
        f"({f(h['iter_ms'], 1)} ms of GPU and {f(h['host_ms'], 1)} ms of host time per "
        f"iteration for {h['model']}: the GPU is busy {f(100 * h['gpu_fraction'], 0)}% of a "
        f"step).  One at a time (`fifo`) against `pack` (all admitted jobs at once; memory "
        f"admission bounds how many).")
    out.append("")
    rows = []
    for s in sets:
        for pol in ("fifo", "pack"):
            st = s[pol]
            rows.append([s["model"], pol, f(st["makespan_s"], 2), f(st["utilization"]),
                         f(st["avg_jct_s"]), st["failed_jobs"]])
    out.append(table(["model", "policy", "makespan s", "utilization", "avg JCT s", "failed"],
                     rows))
    out.append("")
    w = disturbed([(f"{s['model']} {p}", s[p]) for s in sets for p in ("fifo", "pack")])
    if w:
        out += [w, ""]
    rows = [[s["model"], f(s["utilization_gain"]) + "x", f(s["makespan_gain"]) + "x",
             f(s["bound_gain"]) + "x"] for s in sets]
    out.append(table(["model", "utilization gain", "makespan gain",
                      "bound on simgpu (1 / GPU share of a step)"], rows))
    out.append("")
    ug = h["utilization_gain"]
    txt = (f"**What it means.** Packing {h['model']} jobs raises GPU utilization {f(ug)}x "
           f"(the paper: {PAPER['hyper_util']}x), {cmp_word(ug, PAPER['hyper_util'])} the "
           f"paper's figure, and shortens the makespan {f(h['makespan_gain'])}x (the same GPU "
           f"work in less time: the two gains are one).  On simgpu "
           f"packing can only fill the host gaps between a job's iterations, so its gain is "
           f"bounded by 1 / (GPU share of a step) = {f(h['bound_gain'])}x; the paper's packing "
           f"also overlapped small kernels on the SMs, which simgpu cannot show.  ")
    if len(sets) > 1:
        s2 = sets[1]
        txt += (f"A GPU-bound model ({s2['model']}, busy {f(100 * s2['gpu_fraction'], 0)}% of a "
                f"step) gains only {f(s2['utilization_gain'])}x: packing does not make GPU "
                f"work faster, it fills idle time.  ")
    txt += (f"The GPU share of a {h['model']} step ({f(100 * h['gpu_fraction'], 0)}%) is an "
            f"assumption stated in the presets table, not a measurement: the result tests "
            f"whether our `pack` reaches the bound that share allows; on simgpu the paper's "
            f"{PAPER['hyper_util']}x would need jobs that leave the GPU idle "
            f"{f(100 * (1 - 1 / PAPER['hyper_util']), 0)}% of the time.")
    out += [txt, ""]
    return "\n".join(out)


def section_infer(inf):
    out = ["## 3. Inference: services sharing one GPU", ""]
    n = infer_figures(inf)["services"]
    out.append(
        f"**Setup.** {len(inf['models'])} models ({', '.join(inf['models'])}) served at batch 1 "
        f"by `salus-infer`, Poisson requests at {f(inf['rate_rps'], 1)} per second per service "
        f"for {f(inf['seconds'], 1)} s; a request's GPU time and memory are derived from the "
        f"presets (bench/salusbench/presets.py: {f(min(inf['request_ms'].values()), 1)}-"
        f"{f(max(inf['request_ms'].values()), 1)} ms, "
        f"{min(inf['mem_mib'].values())}-{max(inf['mem_mib'].values())} MiB).  A configuration "
        f"fits when every service is served and every service's p99 latency (arrival to "
        f"completion) is within {f(inf['p99_bound_ms'], 0)} ms; with about "
        f"{f(inf['rate_rps'] * inf['seconds'], 0)} requests per service, a service's p99 is "
        f"close to its worst request, so the test is strict and one slow wake-up of the host "
        f"can fail it.  Under Salus the services run "
        f"`{inf['salus_policy']}` with memory admission; `none` is the same processes on the "
        f"GPU without Salus (time slicing, like MPS without its limits).")
    out.append("")
    a = inf["alone"]
    out.append(f"Alone on a GPU each: worst p99 {f(a['p99_ms_max'], 1)} ms, "
               f"{a['within_bound']} of {a['services']} within the bound.")
    out.append("")
    rows = []
    for p in inf["sweep"]:
        for key in ("salus", "none"):
            st = p[key]
            rows.append([p["services"], "Salus" if key == "salus" else "none",
                         f(p["memory_gib"], 1), st["served"], st["failed"],
                         f(st["p99_ms_median"], 1), f(st["p99_ms_max"], 1),
                         f(st.get("utilization")), "yes" if st["fits"] else "no"])
    out.append(table(["services", "under", "memory GiB", "served", "not served",
                      "median p99 ms", "worst p99 ms", "utilization", "fits"], rows))
    out.append("")
    fi = infer_figures(inf)
    n = fi["services"]
    sn, sg = fi["salus_max_services"], fi["salus_gpus_needed"]
    nn, ng = fi["none_max_services"], fi["none_gpus_needed"]
    txt = (f"**What it means.** Under Salus up to {sn} services fit on one GPU, so {n} services "
           f"need {f(sg)} GPU(s) where one GPU each needs {f(fi['one_gpu_each_gpus'])} "
           f"(the paper: {PAPER['infer_salus']} on 1 GPU, and MPS needs "
           f"{PAPER['infer_mps_gpus']}).  Without Salus {nn} fit ({f(ng)} GPU(s) for {n}).  ")
    over = [p for p in inf["sweep"] if p["services"] > n]
    if over:
        p = over[-1]
        txt += (f"Past what memory holds ({p['services']} services, "
                f"{f(p['memory_gib'], 1)} GiB), Salus served {p['salus']['served']} and kept "
                f"{p['salus']['failed']} waiting for admission (worst p99 "
                f"{f(p['salus']['p99_ms_max'], 1)} ms), while without it "
                f"{p['none']['failed']} services failed out of memory and the others' worst p99 "
                f"was {f(p['none']['p99_ms_max'], 1)} ms.  ")
    txt += ("Each service is a process with its own CUDA context, and simgpu charges a "
            "context what one takes on a real GPU (`SIMGPU_CTX_MEMORY`, 512 MiB), so on this "
            f"16 GiB device the contexts of {n} services alone would take "
            f"{f(n * 0.5, 1)} GiB: that, not the models, bounds how many fit, with or without "
            "Salus.  The paper's Salus served every model from one server process with one "
            "context; a transparent layer keeps the programs as they are, one process each, "
            "and MPS pays the same per-process context.  Salus's contribution here is that a "
            "service that does not fit waits for admission instead of failing, that its "
            "context is admitted before it is made, and that a framework which sizes itself "
            "from cuMemGetInfo sees its own share.")
    out += [txt, ""]
    return "\n".join(out)


def eighty(fig):
    x = fig.get("paging_floor_gibps")
    return None if x is None else 0.8 * x


def twice(x):
    return None if x is None else 2 * x


def pair_sizes(raw):
    """'4 KiB +36.4 / +85.1' for each size both memory benchmarks timed."""
    off = ((raw.get("memory") or {}).get("sizes") or {})
    on = ((raw.get("memory_swap") or {}).get("sizes") or {})
    out = []
    for key in sorted(off, key=lambda k: int(k) if k.isdigit() else 0):
        a, b = off.get(key) or {}, on.get(key) or {}
        if not key.isdigit() or "overhead_ns_per_pair" not in a or "overhead_ns_per_pair" not in b:
            continue
        n = int(key)
        size = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
        out.append(f"{size} +{f(a['overhead_ns_per_pair'], 1)} / +{f(b['overhead_ns_per_pair'], 1)}")
    return out


def section_micro(mi, tr=None):
    out = ["## 4. Microbenchmarks", ""]
    fig = (mi or {}).get("figures", {})
    src = (mi or {}).get("sources", {})
    rows = [["ns added per kernel launch (fast path)", f(fig.get("overhead_ns_per_launch"), 1),
             f"<= {TARGETS['launch_ns']}", "HAMi-core +36, nvshare +230"],
            ["... while a peer waits for the GPU", f(fig.get("overhead_ns_per_launch_contended"), 1),
             f"<= {TARGETS['launch_ns']}", "+112 before launches while contended took the fast path"],
            ["... with a context on a second device it does not use",
             f(fig.get("overhead_ns_per_launch_two_devices"), 1), "<= 2",
             "+30 before a process joined devices at its first launch there"],
            ["ns per allocate/free pair", f(fig.get("alloc_ns_per_pair"), 1),
             f"<= {TARGETS['pair_ns']}", "HAMi-core +880, nvshare +28"],
            ["... with paging on (SALUS_SWAP=on), the worst of 4 KiB, 1 MiB and 64 MiB",
             f(fig.get("alloc_ns_per_pair_paging"), 1),
             f"<= 2x off ({f(twice(fig.get('alloc_ns_per_pair_any_size')), 1)})",
             "+397 (1 MiB) before a block kept per size in front of jemalloc"],
            ["handoff latency p50, us (drain included)", f(fig.get("handoff_us_p50"), 1),
             f"<= {TARGETS['handoff_p50_us']}", "futex wake p50 5.6"],
            ["handoff latency p99, us", f(fig.get("handoff_us_p99"), 1),
             f"<= {TARGETS['handoff_p99_us']}", "futex wake p99 15"],
            ["ns added per launch-and-sync round", f(fig.get("overhead_ns_per_sync"), 1),
             "-", "the detector's token, the boundary check"],
            ["... beside 256 idle threads that launched once",
             f(fig.get("overhead_ns_per_sync_idle_threads"), 1),
             "same as alone", "+1878 before the active list (one run, 2 cores)"],
            ["us added to a fresh process, cuInit to its first launch",
             f(fig.get("overhead_us_startup_first_call"), 0), "<= 300",
             f"plain {f(fig.get('plain_us_startup_first_call'), 0)}; +650 before one dladdr "
             "per process, not two per export"],
            ["... the whole process, exec to exit",
             f(fig.get("overhead_us_startup_process"), 0), "-",
             f"plain {f(fig.get('plain_us_startup_process'), 0)}"],
            ["GiB/s paged out to pinned host memory, over simgpu",
             f(fig.get("paging_out_gibps"), 2), f">= 0.8x floor ({f(eighty(fig), 2)})",
             f"floor: min(warm memcpy {f(fig.get('paging_memcpy_gibps'), 2)}, modelled PCIe "
             f"{f(fig.get('paging_pcie_gibps'), 2)}); 1.08 before staging was kept; "
             f"first page-out {f(fig.get('paging_first_out_gibps'), 2)}"],
            ["GiB/s paged back in, over simgpu", f(fig.get("paging_in_gibps"), 2),
             f">= 0.8x floor ({f(eighty(fig), 2)})", "0.86 before"]]
    out.append(table(["figure", "measured", "target", "for reference (design.md)"], rows))
    out.append("")
    sizes = pair_sizes((mi or {}).get("raw", {}))
    if sizes:
        out.append("An allocate/free pair by size, ns added with paging off and on: "
                   + "; ".join(sizes) + ".")
        out.append("")
    rt = ((mi or {}).get("raw", {}).get("sched") or {}).get("handoff", {})
    if isinstance(rt, dict) and rt.get("round_trip_us_per_handoff") is not None:
        out.append(f"The handoff benchmark made one handoff per "
                   f"{f(rt['round_trip_us_per_handoff'], 2)} us of wall time, each "
                   f"process's own work between handoffs included: a rate, not a latency "
                   f"(the latency is the p50/p99 above).")
        out.append("")
    have = [v for v in src.values() if v]
    out.append("Gathered from " + (", ".join(f"`{v}`" for v in have) if have else "nothing")
               + " (the scheduler's, memory module's and start-up's own benchmarks, "
               "bench/sched.mk, bench/memory.mk and bench/startup.mk, over a null driver "
               "that returns at once; paging's GiB/s over simgpu, whose device memory is "
               "host memory: a page-in writes pages the host kernel must first allocate and "
               "zero, which no GPU pays)."
               + ("" if len(have) == len(src) else "  A missing file leaves its figures n/a."))
    out.append("")
    if tr:
        seen = [(p, (tr["policies"][p].get("salus") or {}).get("handoff_us_p50_median"))
                for p in ("fifo", "srtf", "fair")]
        seen = [(p, v) for p, v in seen if v is not None]
        if seen:
            out.append("In the training runs themselves, a handoff (from the holder's release "
                       "decision to the next holder running, as SALUS_REPORT measures it) took "
                       + ", ".join(f"{f(v, 0)} us under {p}" for p, v in seen)
                       + " (the median of the jobs' p50): it includes synchronizing the "
                       "releasing context and the waiter's wake-up on a loaded 2-core host, "
                       "so it is an end-to-end figure, not the futex wake alone.")
            out.append("")
    return "\n".join(out)


SHORTFALL_TEXT = """\
## 5. Where this reproduction falls short, and why

- **Switching granularity.** Salus's scheduler lives inside TensorFlow and
  switches between iterations it sees as graph executions.  Ours is
  transparent: it infers iteration boundaries from host synchronizations
  and hands the GPU over there, after synchronizing the context.  Jobs
  that never synchronize are cut at `SALUS_MAX_SLICE_MS`, coarser.
- **One process per job.** Salus ran every job inside one server process:
  one CUDA context, one allocator, cheap sharing of the GPU's memory.  We
  keep each job in its own process and context, so every context pays its
  own memory and every switch is a hardware context switch (simgpu's 100 us).
- **No spatial sharing on simgpu.** Kernels of different jobs never overlap
  on the simulated engine, so `pack` can only fill idle gaps.  On a real GPU
  small kernels of different processes can overlap (more with MPS); the
  paper's packing gains include that, ours cannot.
- **Compressed time.** Jobs are hundreds of times shorter than the paper's
  so that a trace of 100 fits in minutes; iterations are 20x shorter with
  the model's own kernel lengths.  Fixed costs (process start-up, the first
  iteration's measurement for srtf, admission) weigh more than they would.
- **Modelled workloads.** Iteration times and memory come from the Salus
  authors' own P100 measurements for the CNNs and from stated estimates for
  speech, seq2seq, vae and superres (see workloads/presets.c); the host
  share of an iteration is an assumption for every model.
- **The real-GPU check** (`bench/gpu/check.sh`) covers what simgpu cannot:
  interception through PyTorch's and JAX's CUDA runtime, real overheads,
  real memory; its results are not part of this report.
"""


def section_workloads(tr):
    """The presets the trace draws from, with their sources, and how many
    jobs of each length class the trace has."""
    try:
        pre = presets.training_presets(presets.load())
    except Exception as e:                       # noqa: BLE001 (built tree missing)
        return f"## Appendix: workloads\n\n(preset table unavailable: {e})\n"
    out = ["## Appendix: the workloads", "",
           "From `salus-train --preset list` (workloads/presets.c, where each row's "
           "derivation is written out).  Times are per iteration before compression; memory "
           "is persistent + per-iteration.", ""]
    rows = [[p.name, f(p.iter_ms, 1), f(p.host_ms, 1), p.kernels,
             f"{p.mem_text} + {p.iter_mem_text}", p.iterations, p.source] for p in pre]
    out.append(table(["preset", "GPU ms", "host ms", "kernels", "memory", "iters/min", "source"],
                     rows))
    if tr:
        by = {}
        for j in tr["trace"]:
            by[j["minutes"]] = by.get(j["minutes"], 0) + 1
        out += ["", "Jobs in the trace by the paper's length class: "
                + ", ".join(f"{n} of {m} min" for m, n in sorted(by.items())) + "."]
    out.append("")
    return "\n".join(out)


# ---- assembly -------------------------------------------------------------------

def headline(tr, hp, inf, mi):
    rows = []
    if tr:
        P = tr["policies"]
        U = tr.get("unbounded") or {}
        off_fifo = (tr.get("ideal_fifo") or {}).get("avg_jct_s")
        note = (f"offline model: {f(ratio(off_fifo, P['ideal_srtf']['avg_jct_s']))}x all "
                f"resident, {f(ratio(off_fifo, (tr.get('ideal_srtf_admitted') or {}).get('avg_jct_s')))}x "
                f"peak reserved")
        if U.get("fifo") and U.get("srtf"):
            note += (f"; ours without memory limit: "
                     f"{f(ratio(U['fifo']['avg_jct_s'], U['srtf']['avg_jct_s']))}x")
        rows.append(["training avg JCT, srtf vs fifo (16 GB)", f"{PAPER['jct']}x",
                     f(ratio(P["fifo"]["avg_jct_s"], P["srtf"]["avg_jct_s"])) + "x", note])
    if hp and hp.get("sets"):
        h = hp["sets"][0]
        rows.append([f"tuning utilization, pack vs one at a time ({h['model']})",
                     f"{PAPER['hyper_util']}x", f(h["utilization_gain"]) + "x",
                     "simgpu bound " + f(h["bound_gain"]) + "x"])
    if inf:
        fi = infer_figures(inf)
        rows.append([f"inference: GPUs for {fi['services']} services (Salus / "
                     f"without / one each)", f"1 / MPS {PAPER['infer_mps_gpus']} / 42",
                     f"{f(fi['salus_gpus_needed'])} / {f(fi['none_gpus_needed'])} / "
                     f"{f(fi['one_gpu_each_gpus'])}",
                     f"p99 <= {f(inf['p99_bound_ms'], 0)} ms"])
    fig = (mi or {}).get("figures", {})
    rows.append(["ns per launch / per alloc-free pair / handoff p50, p99 us", "-",
                 f"{f(fig.get('overhead_ns_per_launch'), 1)} / {f(fig.get('alloc_ns_per_pair'), 1)}"
                 f" / {f(fig.get('handoff_us_p50'), 1)}, {f(fig.get('handoff_us_p99'), 1)}",
                 "targets 5 / 60 / 10, 50"])
    return table(["claim", "paper", "ours", "note"], rows)


def render(out_dir, scale, pngs, img_prefix=""):
    tr, hp, inf, mi = results(out_dir)
    timing = config.load_json(out_dir, "timing.json") or {}
    steps = timing.get("steps", {})
    loads = timing.get("load", {})
    L = ["# Salus reproduced over simgpu", ""]
    cmd = {"full": "make bench", "quick": "make bench-quick"}.get(scale.name, "tests/test_bench")
    L.append(f"Scale `{scale.name}` (`{cmd}`), "
             f"{time.strftime('%Y-%m-%d %H:%M', time.localtime())}, {os.cpu_count()} CPUs, "
             f"{platform.machine()}.  Wall time of the experiments: "
             + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items() if k != "report")
             + f" (total {sum(v for k, v in steps.items() if k != 'report'):.0f} s).  "
             + (f"Host load average (1 min) after each step: "
                + ", ".join(f"{k} {v:.1f}" for k, v in loads.items()) + ": the jobs are "
                "real processes, so a busy host slows them.  " if loads else "")
             + "Every figure below is computed from this run's files "
             "(bench/results/*.json); rerun with `make bench` or "
             "`python3 bench/run.py all --scale full`.")
    L += ["", "The paper: Peifeng Yu and Mosharaf Chowdhury, *Fine-Grained GPU Sharing "
          "Primitives for Deep Learning Applications* (Salus), MLSys 2020, arXiv 1902.04610.",
          "", headline(tr, hp, inf, mi), "", SIMGPU_TEXT, ""]
    if tr:
        L.append(section_training(tr, steps))
        for png, cap in (("training_jct_cdf.png", "JCT distribution per policy"),
                         ("training_timeline.png", "GPU timeline of a few jobs"),
                         ("training_utilization.png", "GPU utilization over time")):
            if png in pngs:
                L += [f"![{cap}]({img_prefix}{png})", ""]
    if hp:
        L.append(section_hyper(hp))
        if "hyperparam_utilization.png" in pngs:
            L += [f"![tuning utilization]({img_prefix}hyperparam_utilization.png)", ""]
    if inf:
        L.append(section_infer(inf))
        if "inference_p99.png" in pngs:
            L += [f"![inference p99]({img_prefix}inference_p99.png)", ""]
    mx = config.load_json(out_dir, "mixed.json")
    if mx:
        L.append(section_mixed(mx))
    sl = config.load_json(out_dir, "slicing.json")
    if sl:
        L.append(section_slicing(sl))
    L.append(section_pytorch(config.load_json(out_dir, "pytorch.json")))
    L.append(section_micro(mi, tr))
    L.append(SHORTFALL_TEXT)
    L.append(section_workloads(tr))
    if not pngs:
        L.append("_No plots: matplotlib is not installed (`apt-get install "
                 "python3-matplotlib`)._\n")
    return "\n".join(L)


def section_mixed(mx):
    """A service beside two training jobs, per policy."""
    pols = mx.get("policies") or {}
    rows = [[pol, f(st.get("p50_ms"), 1), f(st.get("p99_ms"), 1),
             f(st.get("training_avg_jct_s"), 2), st.get("requests")]
            for pol, st in pols.items()]
    out = ["## A latency-sensitive service beside training", "",
           f"One inference service ({mx['rate_rps']} requests/s, 2 ms of GPU each, "
           f"`SALUS_LATENCY_MS={mx['latency_ms']}` under Salus) beside two training jobs "
           f"(10 ms of GPU per iteration) on one GPU, for {mx['seconds']:g} s; "
           "`fair-no-latency` is fair without the variable.  Latency is arrival to "
           "completion, queueing included.", "",
           table(["policy", "service p50, ms", "service p99, ms", "training avg JCT, s",
                  "requests"], rows), ""]
    fair, plain = pols.get("fair") or {}, pols.get("fair-no-latency") or {}
    if fair.get("p99_ms") is not None and plain.get("p99_ms") is not None:
        out.append(f"Under `fair`, `SALUS_LATENCY_MS` takes the service's p99 from "
                   f"{f(plain['p99_ms'], 1)} ms to {f(fair['p99_ms'], 1)} ms (target "
                   f"{mx['latency_ms']} ms); the training jobs' average JCT goes from "
                   f"{f(plain.get('training_avg_jct_s'), 2)} s to "
                   f"{f(fair.get('training_avg_jct_s'), 2)} s.")
        out.append("")
    return "\n".join(out)


def section_slicing(sl):
    """Two identical jobs with host phases, Salus fair against none."""
    rows = []
    for r in sl.get("shares") or []:
        rows.append([f"{r['host_share']:.0%}", f(r.get("host_ms"), 1),
                     f(r.get("salus_makespan_s"), 3), f(r.get("none_makespan_s"), 3),
                     f(ratio(r.get("salus_makespan_s"), r.get("none_makespan_s")), 3),
                     f(r.get("salus_busy"), 3), f(r.get("none_busy"), 3),
                     f(r.get("salus_switches"), 0)])
    reps = sl.get("repeats", 1)
    out = ["## GPU time that time slicing wastes", "",
           f"Two identical training jobs ({f(sl['gpu_ms'], 0)} ms of GPU per iteration: "
           f"{sl['kernels']} kernels and an item-like sync; {sl['iterations']} iterations "
           f"each) arrive together on one GPU, with a host phase of the share of an iteration "
           f"below, under Salus `fair` and without Salus (`none`: simgpu's engine runs both "
           f"processes' kernels in submission order, as the hardware's own time slicing "
           f"does).  GPU busy is the union of kernel intervals over the span from the first "
           f"kernel's start to the last one's end; "
           + (f"each figure is the median of {reps} runs" if reps > 1 else "one run each")
           + f" (host load average {f(sl.get('load'), 1)} at the end).", "",
           table(["host share", "host ms", "makespan fair, s", "makespan none, s",
                  "fair / none", "GPU busy fair", "GPU busy none", "handoffs, fair"],
                 rows), "",
           "A handoff is exclusive: the next holder submits only once every kernel, copy "
           "and memset of the last one is done (the drain) and it has been woken, so each "
           "one leaves the GPU idle for a wake-up and the engine's context-switch penalty "
           "(simgpu: 100 us); without Salus simgpu queues both processes' kernels ahead, "
           "so it loses only the penalty.  Host syncs return as the driver's default "
           "spinning wait does (`SIMGPU_SYNC_SPIN_US`), not tens of microseconds late.", "",
           "The rule (docs/design.md, \"Filling host phases\"): under `fair`, a holder "
           "whose host phase after a boundary is at least `SALUS_FILL_US` (250 us) yields "
           "at every boundary to a waiter with no more GPU time, so the waiter's kernels "
           "fill the holder's host phase while handoffs stay exclusive."]
    goal = next((r for r in sl.get("shares") or [] if abs(r["host_share"] - 0.2) < 1e-9), None)
    gap = None
    if goal and goal.get("salus_busy") is not None and goal.get("none_busy"):
        gap = 1.0 - goal["salus_busy"] / goal["none_busy"]
    if gap is not None:
        out[-1] += (f"  At {f(goal.get('host_ms'), 0)} ms of host work the GPU is busy "
                    f"{f(goal['salus_busy'], 3)} of the time under `fair` against "
                    f"{f(goal['none_busy'], 3)} without Salus, {f(100 * gap, 1)}% less: "
                    + ("within" if gap <= 0.01 else "outside")
                    + " the goal of 1%.")
    out.append("")
    return "\n".join(out)


def run(scale, out_dir):
    tr, hp, inf, mi = results(out_dir)
    mx = config.load_json(out_dir, "mixed.json")
    sl = config.load_json(out_dir, "slicing.json")
    pt = config.load_json(out_dir, "pytorch.json")
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary(tr, hp, inf, mi, mx, sl, pt), fh, indent=1)
    pngs = plots.draw(out_dir)
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write(render(out_dir, scale, pngs))
    if scale.publish:
        pub = os.path.join(config.ROOT, "bench")
        os.makedirs(os.path.join(pub, "report"), exist_ok=True)
        for p in pngs:
            shutil.copy(os.path.join(out_dir, p), os.path.join(pub, "report", p))
        shutil.copy(os.path.join(out_dir, "summary.json"),
                    os.path.join(pub, "report", "summary.json"))
        with open(os.path.join(pub, "REPORT.md"), "w") as fh:
            fh.write(render(out_dir, scale, pngs, img_prefix="report/"))
    print(f"bench: report: {os.path.join(out_dir, 'report.md')}, summary.json, "
          f"{len(pngs)} plots", flush=True)
    # At the scale that runs paging (make bench), a job that failed under
    # Salus in any run fails the bench, once the report is written.
    return repeats.failed_runs(tr or {}) if scale.swap else []
