"""Real PyTorch training jobs sharing one simgpu, with or without libsalus.

What make bench's torch step (torchbench.py) and make demo-torch
(mk/demo_torch.py) run: bench/torch/train.py, a plain PyTorch program with
no Salus in it, in processes of the frameworks' interpreter (FW_ENV, made
by mk/fwenv.sh), over simgpu with its shape model of kernel durations
(sim/README.md, "Kernel durations": SIMGPU_KERNEL_WAVE_NS and the table
bench/torch/kernels.table), so that PyTorch's, cuBLAS's and cuDNN's
kernels take time in proportion to the tensors they cover.  Under a Salus
policy each job is started by `salus run` with its name and priority;
policy "none" starts the same processes bare, and simgpu's engine
time-slices their kernels (with its context-switch penalty), as the
driver does without Salus.

A job arrives once every job started before it has launched at least its
`after_kernels` kernels (simgpu's trace, read as it grows): its set-up and
some iterations, whatever an interpreter's start took on a loaded host.

Per job: the JCT (its arrival to its exit: the interpreter's start and the
model's set-up included, as its user waits for them), its loop's time and
iterations (its RESULT line), the iterations libsalus's detector found
beside the true count (the loop's iterations and the warm-up step, one
host sync each), the launches per iteration libsalus saw, its GPU time and
the times the GPU was handed to it (the trace).  Times are CLOCK_MONOTONIC
ns, simgpu's clock.

Runs with Debian's python3 (the standard library only): the frameworks
are in the jobs' interpreter, not in this one's.
"""
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import List, Optional

from . import analysis, config
from .runner import _names, _remove_table, _unlink_shm

TRAIN_PY = os.path.join(config.ROOT, "bench", "torch", "train.py")
KERNEL_TABLE = os.path.join(config.ROOT, "bench", "torch", "kernels.table")
# The shape model's settings (sim/README.md): a wave of an elementwise
# kernel 3 us, a kernel's fixed part 2 us, GEMMs and convolutions by the table.
SIM_ENV = {"SIMGPU_KERNEL_WAVE_NS": "3000", "SIMGPU_KERNEL_LAUNCH_NS": "2000",
           "SIMGPU_KERNEL_TABLE": KERNEL_TABLE}
# What a job must not inherit from whoever ran make.
_SCRUB = ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "PYTHONPATH")
_PID = re.compile(rb'"pid":(\d+),')


def fw_python(env_dir=None):
    """(the frameworks' interpreter, None), or (None, why there is none)."""
    env_dir = env_dir or os.environ.get("FW_ENV") or os.path.join(config.BUILD, "frameworks")
    py = os.path.join(env_dir, "bin", "python")
    if not os.path.exists(os.path.join(env_dir, ".ready")) or not os.access(py, os.X_OK):
        return None, (f"no frameworks environment at {env_dir} (make test-frameworks, or "
                      f"sh mk/fwenv.sh {env_dir} tests/frameworks/requirements.txt, makes it; "
                      f"FW_ENV=dir names another)")
    return py, None


@dataclass
class TorchJob:
    name: str
    model: str                  # train.py --model: mlp, cnn, transformer
    iterations: int
    priority: int = 50
    after_kernels: int = 0      # arrive once each earlier job launched this many


@dataclass
class TorchResult:
    job: TorchJob
    pid: int = 0
    arrival_ns: int = 0
    exit_ns: int = 0
    rc: Optional[int] = None
    result: dict = field(default_factory=dict)      # train.py's RESULT line
    report: dict = field(default_factory=dict)      # libsalus's report of its process
    stderr: str = ""

    @property
    def ok(self):
        return self.rc == 0 and bool(self.result)

    @property
    def jct_s(self):
        return (self.exit_ns - self.arrival_ns) / 1e9 if self.ok else None

    @property
    def true_iterations(self):
        """The loop's iterations and the warm-up step: one host sync each."""
        return self.result["iterations"] + 1 if self.result else None


@dataclass
class TorchRun:
    policy: str
    results: List[TorchResult]
    trace_path: str
    report_path: str
    wall_s: float


class _Trace:
    """Kernels per pid of a trace that grows, read from where it was left."""

    def __init__(self, path):
        self.path, self.at, self.rest, self.count = path, 0, b"", {}

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.at)
                data = f.read()
        except OSError:
            return self.count
        self.at += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            m = _PID.search(line)
            if m and b'"kind":"kernel"' in line:
                pid = int(m.group(1))
                self.count[pid] = self.count.get(pid, 0) + 1
        return self.count


def _env(python, policy, state, table, trace, report):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("SALUS_") or k.startswith("SIMGPU_") or k in _SCRUB)}
    env.update(SIM_ENV)
    env.update({"LD_LIBRARY_PATH": config.SIMGPU_DIR, "SIMGPU_STATE": state,
                "SIMGPU_MEMORY": config.GPU_MEMORY, "SIMGPU_TRACE": trace,
                "SALUS_TABLE": table, "PYTHONDONTWRITEBYTECODE": "1"})
    if policy != "none":
        env.update({"SALUS_POLICY": policy, "SALUS_REPORT": report})
    return env


def run(jobs, policy, python, workdir, tag, deadline_s, extra_env=None):
    """Run jobs (TorchJob, in arrival order) under policy ("none" or a
    SALUS_POLICY); a TorchRun.  Past deadline_s every job is killed (it
    then has no RESULT: not ok)."""
    os.makedirs(workdir, exist_ok=True)
    state, table = _names(tag)
    trace = os.path.join(workdir, f"{tag}.trace.jsonl")
    report = os.path.join(workdir, f"{tag}.salus.jsonl")
    for p in (trace, report):
        if os.path.exists(p):
            os.unlink(p)
    env = _env(python, policy, state, table, trace, report)
    env.update(extra_env or {})
    results = [TorchResult(job=j) for j in jobs]
    procs = {}
    tr = _Trace(trace)
    t0 = time.monotonic()
    nxt = 0
    try:
        while nxt < len(jobs) or procs:
            count = tr.poll()
            if nxt < len(jobs) and all(count.get(r.pid, 0) >= jobs[nxt].after_kernels
                                       for r in results[:nxt]):
                procs[_spawn(results[nxt], policy, python, env, workdir, tag)] = results[nxt]
                nxt += 1
            for pid, r in list(procs.items()):
                rc = r.proc.poll()
                if rc is not None:
                    r.rc, r.exit_ns = rc, time.monotonic_ns()
                    del procs[pid]
            if time.monotonic() - t0 > deadline_s:
                break
            time.sleep(0.02)
    finally:
        for r in procs.values():
            try:
                os.killpg(r.pid, signal.SIGKILL)
            except OSError:
                pass
            r.proc.wait()
        _unlink_shm(state)
        _remove_table(table)
    rows = {x.get("pid"): x for x in analysis.iter_jsonl(report)} if policy != "none" else {}
    for r in results:
        r.result = _result_line(os.path.join(workdir, f"{tag}.{r.job.name}.out"))
        r.report = rows.get(r.pid, {})
        try:
            with open(os.path.join(workdir, f"{tag}.{r.job.name}.err"), errors="replace") as f:
                r.stderr = f.read()[-2000:]
        except OSError:
            pass
        r.__dict__.pop("proc", None)
    return TorchRun(policy, results, trace, report, time.monotonic() - t0)


def _spawn(r, policy, python, env, workdir, tag):
    j = r.job
    cmd = [python, TRAIN_PY, "--model", j.model, "--iterations", str(j.iterations),
           "--name", j.name]
    if policy != "none":
        # Its length, as a user would declare it (srtf ranks by it): the
        # loop's iterations and the warm-up step.
        cmd = [config.SALUS, "run", "--name", j.name, "--priority", str(j.priority),
               "--iterations", str(j.iterations + 1), "--"] + cmd
    out = os.path.join(workdir, f"{tag}.{j.name}.out")
    err = os.path.join(workdir, f"{tag}.{j.name}.err")
    r.arrival_ns = time.monotonic_ns()
    with open(out, "w") as fo, open(err, "w") as fe:
        r.proc = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    r.pid = r.proc.pid                  # salus run execs the job: the same pid
    return r.pid


def _result_line(path):
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("RESULT "):
                    return json.loads(line[7:])
    except (OSError, ValueError):
        pass
    return {}


# ---- what a run shows ---------------------------------------------------------------------


def figures(run):
    """Per job and for the run: what the tables of the demo and the bench show."""
    kernels = analysis.load_trace(run.trace_path)
    ok = [r for r in run.results if r.ok]
    jobs = {}
    for r in run.results:
        mine = [k for k in kernels if k[2] == r.pid]
        found = r.report.get("iterations")
        jobs[r.job.name] = {
            "model": r.job.model, "priority": r.job.priority, "ok": r.ok,
            "jct_s": r.jct_s, "loop_s": r.result.get("loop_s"),
            "iterations": r.result.get("iterations"),
            "true_iterations": r.true_iterations, "found_iterations": found,
            "launches_per_iteration": (r.report["launches"] / found
                                       if found and r.report.get("launches") else None),
            "gpu_s": sum(e - s for s, e, _ in mine) / 1e9,
            "handed_to": sum(1 for a, b in zip(kernels, kernels[1:])
                             if b[2] == r.pid and a[2] != r.pid),
            "switches": r.report.get("switches"), "gpu_held_s": (
                r.report["gpu_held_ms"] / 1e3 if "gpu_held_ms" in r.report else None),
            "why": None if r.ok else _why(r)}
    arrivals = [r.arrival_ns for r in run.results if r.arrival_ns]
    merged = analysis.union(kernels)
    span = (max(e for _, e in merged) - merged[0][0]) if merged else 0
    return {"policy": run.policy, "jobs": jobs,
            "failed_jobs": len(run.results) - len(ok),
            "avg_jct_s": (sum(r.jct_s for r in ok) / len(ok)) if ok else None,
            "makespan_s": ((max(r.exit_ns for r in ok) - min(arrivals)) / 1e9
                           if ok and len(ok) == len(run.results) else None),
            "context_switches": sum(1 for a, b in zip(kernels, kernels[1:]) if a[2] != b[2]),
            "gpu_busy": analysis.busy_ns(merged) / span if span else None,
            "wall_s": round(run.wall_s, 2)}


def _why(r):
    if r.rc is None:
        return "did not end by the deadline (killed)"
    said = [l for l in r.stderr.splitlines() if l.strip()][-2:]
    return f"exit {r.rc}: " + (" | ".join(said) or "(no stderr)")


def share_while(run, name):
    """Each job's share of the GPU's kernel time while job `name` ran its
    kernels (from its first kernel's start to its last one's end)."""
    kernels = analysis.load_trace(run.trace_path)
    pid = next((r.pid for r in run.results if r.job.name == name), None)
    mine = [k for k in kernels if k[2] == pid]
    if not mine:
        return {}
    lo, hi = mine[0][0], max(e for _, e, _ in mine)
    busy = {}
    for s, e, p in kernels:
        a, b = max(s, lo), min(e, hi)
        if b > a:
            busy[p] = busy.get(p, 0) + b - a
    total = sum(busy.values()) or 1
    return {r.job.name: busy.get(r.pid, 0) / total for r in run.results}
