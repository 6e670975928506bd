"""The report's section and summary.json's entry for the PyTorch experiment
(pytorch.py): per policy, the jobs' JCT, the switches and the iterations
libsalus found; or the reason the step was skipped."""
from .report_fmt import f, table

PYTORCH_KEYS = ["avg_jct_s", "makespan_s", "context_switches", "gpu_busy", "failed_jobs",
                "found_iterations", "true_iterations"]


def summary_pytorch(pt):
    """summary.json's "pytorch": {"skipped": why} or {policy: {PYTORCH_KEYS}}."""
    if not pt:
        return {"skipped": "the pytorch step did not run (no pytorch.json)"}
    if pt.get("skipped"):
        return {"skipped": pt["skipped"]}
    out = {}
    for pol, fig in (pt.get("policies") or {}).items():
        jobs = fig.get("jobs") or {}
        row = {k: fig.get(k) for k in PYTORCH_KEYS[:5]}
        row["found_iterations"] = {n: j.get("found_iterations") for n, j in jobs.items()}
        row["true_iterations"] = {n: j.get("true_iterations") for n, j in jobs.items()}
        out[pol] = row
    return out


def check_pytorch(p):
    """Problems with summary.json's "pytorch" entry."""
    if not isinstance(p, dict) or not p:
        return ["pytorch is not a non-empty object"]
    if "skipped" in p:
        return [] if isinstance(p["skipped"], str) and p["skipped"] else \
            ["pytorch.skipped is not a reason"]
    probs = []
    for pol, row in p.items():
        if not isinstance(row, dict):
            probs.append(f"pytorch.{pol} is not an object")
            continue
        probs += [f"pytorch.{pol}.{k} missing" for k in PYTORCH_KEYS if k not in row]
    return probs


def _n(x):
    return "-" if x is None else str(x)


def section_pytorch(pt):
    head = ["## PyTorch jobs sharing one GPU", ""]
    if not pt or pt.get("skipped"):
        why = (pt or {}).get("skipped") or "the step did not run (no pytorch.json)"
        return "\n".join(head + [f"**Skipped**: {why}.", ""])
    env = pt.get("sim_env") or {}
    specs = pt.get("jobs") or []
    out = head + [
        "Unmodified PyTorch training jobs (`bench/torch/train.py`: "
        + ", ".join(f"`{j['model']}` x {j['iterations']} iterations at priority "
                    f"{j['priority']}" for j in specs)
        + "), each arriving once the ones before it began on the GPU, share one simgpu whose kernels "
        "take time from their launch shapes (sim/README.md, \"Kernel durations\": "
        + ", ".join(f"`{k}={v}`" for k, v in env.items())
        + "), under each policy and without Salus (`none`: simgpu's engine time-slices the "
        "processes' kernels, 100 us per context switch).  JCT runs from the process's start "
        "(importing torch and building the model included) to its exit, the loop is the "
        "training loop's own time; iterations are libsalus's detector's count against the "
        "true one (the loop's and the warm-up step: one host sync each; none without Salus) (host load average "
        f"{f(pt.get('load'), 1)} at the end).", ""]
    rows = []
    for pol, fig in (pt.get("policies") or {}).items():
        jobs = fig.get("jobs") or {}
        rows.append([pol, f(fig.get("avg_jct_s"), 2), f(fig.get("makespan_s"), 2),
                     fig.get("context_switches"), f(fig.get("gpu_busy"), 3),
                     fig.get("failed_jobs")]
                    + [f"{f(j.get('jct_s'), 2)} / {f(j.get('loop_s'), 2)} s, "
                       f"{_n(j.get('found_iterations'))}/{_n(j.get('true_iterations'))}"
                       for j in jobs.values()])
    names = list(((pt.get("policies") or {}).get("none") or
                  next(iter((pt.get("policies") or {}).values()), {})).get("jobs", {}))
    out += [table(["policy", "avg JCT, s", "makespan, s", "context switches", "GPU busy",
                   "failed"] + [f"{n}: JCT / loop, iterations found/true" for n in names], rows), ""]
    lpi = [(n, j.get("launches_per_iteration"))
           for fig in (pt.get("policies") or {}).values() for n, j in fig["jobs"].items()
           if j.get("launches_per_iteration")]
    seen = {}
    for n, v in lpi:
        seen.setdefault(n, v)
    if seen:
        out += ["Launches per iteration as libsalus saw them: "
                + ", ".join(f"{n} {v:.0f}" for n, v in seen.items()) + ".", ""]
    return "\n".join(out)
