"""Run a set of jobs over simgpu, each at its arrival time.

One run = one simulated GPU (its own SIMGPU_STATE), one arbitration table
(its own SALUS_TABLE), one kernel trace (SIMGPU_TRACE) and, under Salus,
one SALUS_REPORT.  Policy "none" runs the same processes without libsalus:
simgpu's engine time-slices them and its memory fails what does not fit.
Under a Salus policy every job declares its length (SALUS_ITERATIONS and
SALUS_LENGTH_MS, for srtf) and reserves its peak memory (SALUS_MEM_RESERVE: admission, as
Salus's lanes), so that a job that does not fit waits instead of failing.

Arrival and completion times are CLOCK_MONOTONIC nanoseconds, the clock of
simgpu's trace and of the jobs' result lines.
"""
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import List, Optional

from . import config
from .presets import env_simgpu

# What salus-train and salus-infer allocate beside --mem and --iter-mem (wl_gpu.c).
AUX_BYTES = 1 << 20


@dataclass
class Result:
    job: object
    arrival_ns: int
    exit_ns: int = 0
    rc: Optional[int] = None
    line: dict = field(default_factory=dict)   # the job's JSON result line
    stderr: str = ""
    killed: bool = False

    @property
    def ok(self):
        return self.rc == 0 and self.line.get("ok") is True

    @property
    def end_ns(self):
        return int(self.line.get("end_ns", self.exit_ns)) if self.line else self.exit_ns

    @property
    def jct_s(self):
        return (self.end_ns - self.arrival_ns) / 1e9 if self.ok else None


@dataclass
class Run:
    policy: str
    results: List[Result]
    trace_path: str
    report_path: str
    t0_ns: int
    wall_s: float


_counter = [0]


def _names(tag):
    """A simulated GPU and a table of the run's own.  Not salus-* or
    simgpu-*: names that tools and people clean up by pattern."""
    _counter[0] += 1
    base = f"bench-{os.getpid()}-{_counter[0]}-{tag}"
    return "/" + base + "-gpu", "/" + base + "-table"


def _unlink_shm(name):
    try:
        os.unlink("/dev/shm" + name)
    except OSError:
        pass


def _remove_table(name):
    """Remove a run's table with `salus reset`, which removes the GPU claims
    naming it too (its jobs are reaped: --force only skips the check for
    live processes); without the tool, the table alone."""
    if os.path.exists(config.SALUS):
        try:
            done = subprocess.run([config.SALUS, "reset", "--force", "-t", name],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=30)
            if done.returncode == 0:
                return
        except (OSError, subprocess.SubprocessError):
            pass
    _unlink_shm(name)


def run_jobs(jobs, policy, workdir, tag, deadline_s=None, stop_at_s=None, extra_env=None,
             reserve=True, lengths=True):
    """Run `jobs` under `policy` ("none" or a SALUS_POLICY); returns a Run.
    reserve=False: no SALUS_MEM_RESERVE (no admission).
    lengths=False: a job declares its iterations only, not its expected
    length in time (SALUS_LENGTH_MS).
    stop_at_s: SIGTERM every job still running then (services), SIGKILL
    2 s later.  deadline_s: SIGKILL everything then (a safety net)."""
    os.makedirs(workdir, exist_ok=True)
    state, table = _names(tag)
    trace = os.path.join(workdir, f"{tag}.trace.jsonl")
    report = os.path.join(workdir, f"{tag}.salus.jsonl")
    for p in (trace, report):
        if os.path.exists(p):
            os.unlink(p)
    env = env_simgpu()
    env.update({"SIMGPU_STATE": state, "SIMGPU_MEMORY": config.GPU_MEMORY,
                "SIMGPU_TRACE": trace, "SALUS_TABLE": table})
    for k in ("LD_PRELOAD", "SALUS_POLICY", "SALUS_MEM_RESERVE", "SALUS_ITERATIONS",
              "SALUS_LENGTH_MS", "SALUS_MEM_LIMIT", "SALUS_REPORT"):
        env.pop(k, None)
    if policy != "none":
        env.update({"LD_PRELOAD": config.LIBSALUS, "SALUS_POLICY": policy,
                    "SALUS_REPORT": report})
    env.update(extra_env or {})

    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
    procs = {}                      # pid -> (Popen, Result, out path, err path)
    results = [None] * len(jobs)
    t0 = time.monotonic_ns()
    nxt = 0
    termed = killed = False
    try:
        while nxt < len(order) or procs:
            now = time.monotonic_ns()
            el = (now - t0) / 1e9
            while nxt < len(order) and jobs[order[nxt]].arrival_s <= el:
                i = order[nxt]
                nxt += 1
                results[i] = _spawn(jobs[i], policy, env, workdir, tag, procs, reserve, lengths)
            if stop_at_s is not None and el >= stop_at_s and not termed:
                termed = True
                for p, r, _, _ in procs.values():
                    r.killed = True
                    p.send_signal(signal.SIGTERM)
            kill_at = deadline_s if deadline_s is not None else None
            if stop_at_s is not None:
                kill_at = min(kill_at or 1e18, stop_at_s + 2.0)
            if kill_at is not None and el >= kill_at and not killed:
                killed = True
                for p, r, _, _ in procs.values():
                    r.killed = True
                    p.kill()
            _reap(procs)
            if nxt < len(order):
                wait = jobs[order[nxt]].arrival_s - (time.monotonic_ns() - t0) / 1e9
                time.sleep(min(max(wait, 0.0), 0.005))
            else:
                time.sleep(0.005)
    finally:
        for p, _, _, _ in procs.values():
            p.kill()
        _reap(procs, block=True)
        _unlink_shm(state)
        _remove_table(table)
        for j in jobs:                  # jobs given a GPU of their own
            if "SIMGPU_STATE" in j.env:
                _unlink_shm(j.env["SIMGPU_STATE"])
            if "SALUS_TABLE" in j.env:
                _remove_table(j.env["SALUS_TABLE"])
    return Run(policy=policy, results=results, trace_path=trace, report_path=report,
               t0_ns=t0, wall_s=(time.monotonic_ns() - t0) / 1e9)


def _spawn(job, policy, env, workdir, tag, procs, reserve=True, lengths=True):
    prog = config.TRAIN if job.program == "train" else config.INFER
    jenv = dict(env)
    if policy != "none":
        if job.iterations:
            jenv["SALUS_ITERATIONS"] = str(job.iterations)
        if job.declared_s and lengths:
            # What its user would say: "about 5 minutes" (the trace's class,
            # compressed); srtf ranks by it until an iteration is measured.
            jenv["SALUS_LENGTH_MS"] = str(max(1, round(job.declared_s * 1000)))
        if job.peak and reserve:
            # The peak of its buffers and the workload's own aux buffers (two
            # of 256 KiB): a reservation that leaves them out needs room
            # beside it, which a device filled by reservations may not have.
            jenv["SALUS_MEM_RESERVE"] = size_arg(job.peak + AUX_BYTES)
    jenv.update(job.env)
    out = os.path.join(workdir, f"{tag}.{job.name}.out")
    err = os.path.join(workdir, f"{tag}.{job.name}.err")
    arrival = time.monotonic_ns()
    with open(out, "w") as fo, open(err, "w") as fe:
        p = subprocess.Popen([prog] + job.args, env=jenv, stdout=fo, stderr=fe,
                             stdin=subprocess.DEVNULL)
    r = Result(job=job, arrival_ns=arrival)
    procs[p.pid] = (p, r, out, err)
    return r


def size_arg(nbytes):
    """A byte count as libsalus's size grammar takes it: exact bytes
    ("<n>B") from 1 MiB up, whole KiB (rounded up) below."""
    n = int(nbytes)
    return f"{n}B" if n >= config.MiB else f"{(n + 1023) // 1024}K"


# libsalus refuses a malformed variable, says so once and goes on without
# it: a run that did is not the experiment it claims to be.
_REFUSED = re.compile(r"salus\[\d+\]: error: (SALUS_\w+)=.* is not accepted")


def _reap(procs, block=False):
    for pid in list(procs):
        p, r, out, err = procs[pid]
        rc = p.wait() if block else p.poll()
        if rc is None:
            continue
        r.exit_ns = time.monotonic_ns()
        r.rc = rc
        r.line = _last_json(out)
        try:
            with open(err) as f:
                head = f.read(4096)
                f.seek(0)
                r.stderr = f.read()[-2000:]
        except OSError:
            head = ""
        del procs[pid]
        m = _REFUSED.search(head)
        if m:
            raise RuntimeError(f"bench: job {r.job.name} was given a {m.group(1)} libsalus "
                               f"refuses: {m.group(0)[:200]}")


def _last_json(path):
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}
