"""What the framework scenarios of make test-frameworks share.

A scenario is one file, tests/frameworks/<nn>_<name>.py, started once by
run.py with the frameworks' interpreter and no libsalus.  It is both the
driver of its cases and the program of its jobs: fwlib.main() runs the
cases (functions named case_*, in the order the file lists them in CASES)
or, with "job" as the first argument, the file's job() under whatever
environment the driver gave it.  A job is a real framework program over
simgpu (LD_LIBRARY_PATH=build/sim) with libsalus preloaded; it prints one
line "FWDID <json>" of what it did (did()), and the driver holds that
against libsalus's report (SALUS_REPORT), simgpu's trace (SIMGPU_TRACE)
and the job's stderr.

Kernels over simgpu compute nothing: a job never branches on computed data,
and checks bytes through host copies only.

Each case prints one line that run.py counts: "PASS <case>",
"FAIL <case>: <why>" or "SKIP <case>: <why>".  A case skips only when the
same job fails without libsalus too (bare simgpu cannot carry it: what
simgpu lacks is then said); a job that runs bare and fails under libsalus
is a failure of libsalus.

Divided into: paths and the environment of a run; jobs (spawn, wait with a
deadline); libsalus's report and simgpu's trace; checks; main.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("FW_BUILD", os.path.join(ROOT, "build")))
MIB = 1 << 20
BARE_S = 300                # a job's rerun without libsalus, to tell who fails
GIB = 1 << 30

# ---- paths and the environment of a run -------------------------------------------


class Skip(Exception):
    """A case that cannot run here, and why (counted by run.py)."""


class Fail(AssertionError):
    """A check that did not hold."""


def check(cond, fmt, *args):
    if not cond:
        raise Fail(fmt % args if args else fmt)


_seq = [0]


def unique(prefix):
    """A shared-memory name no other run uses (removed by Run.close)."""
    _seq[0] += 1
    return "/%s-%d-%d" % (prefix, os.getpid(), _seq[0])


# What a job must not inherit from whoever ran make.
_SCRUB = ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
          "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
          "JAX_PLATFORMS", "PJRT_NAMES_AND_LIBRARY_PATHS")


class Run:
    """One simgpu state and one Salus table, a directory for the jobs'
    files, one trace.  Jobs of one Run share the GPU."""

    def __init__(self, name, memory="16G", devices=1, salus=True, env=None):
        self.name = name
        self.common = dict(env or {})           # every job's variables more
        self.dir = tempfile.mkdtemp(prefix="fw-%s-" % name,
                                    dir=os.environ.get("FW_TMP"))
        self.state = unique("fwsim")
        self.table = unique("fwtab")
        self.trace = os.path.join(self.dir, "trace.jsonl")
        self.memory = memory
        self.devices = devices
        self.salus = salus
        self.jobs = []

    def env(self, job_name, extra):
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith("SALUS_") or k.startswith("SIMGPU_") or k in _SCRUB)}
        sim = os.path.join(BUILD, "sim")
        env["LD_LIBRARY_PATH"] = sim
        env["TRITON_LIBCUDA_PATH"] = sim             # Triton's launcher opens libcuda itself
        env["SIMGPU_STATE"] = self.state
        env["SIMGPU_MEMORY"] = self.memory
        env["SIMGPU_DEVICES"] = str(self.devices)
        env["SIMGPU_TRACE"] = self.trace
        env["SIMGPU_LOG"] = "1"
        # A context takes no device memory of its own (simgpu's default is
        # 512M), so that a limit bounds what the framework allocates.
        env["SIMGPU_CTX_MEMORY"] = "0"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONFAULTHANDLER"] = "1"     # a job killed by a signal says where it was
        env["SALUS_TABLE"] = self.table
        env["SALUS_REPORT"] = os.path.join(self.dir, job_name + ".report")
        if self.salus:
            env["LD_PRELOAD"] = os.path.join(BUILD, "libsalus.so")
        env.update({k: str(v) for k, v in dict(self.common, **extra).items()})
        return env

    def start(self, job_name, args=(), env=None, script=None):
        """Start a job: this file (or script) with "job" and args."""
        j = Job(self, job_name, list(args), env or {}, script or sys.argv[0])
        self.jobs.append(j)
        return j

    def kernels(self):
        return trace_load(self.trace, kinds=("kernel",))

    def close(self):
        for j in self.jobs:
            j.kill()
        for name in (self.state, self.table):
            try:
                os.unlink("/dev/shm" + name)
            except OSError:
                pass
        _unlink_claims(self.table)


def _unlink_claims(table):
    """The GPU claims (/dev/shm/salus-gpu-<uuid>) that name our table."""
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for n in names:
        if not n.startswith("salus-gpu-"):
            continue
        p = "/dev/shm/" + n
        try:
            with open(p) as f:
                words = f.read().split()
            if len(words) >= 2 and words[1] == table:
                os.unlink(p)
        except OSError:
            pass


# ---- jobs -----------------------------------------------------------------------


class Job:
    def __init__(self, run, name, args, env, script):
        self.run, self.name = run, name
        self.args, self.extra, self.script = args, env, script
        self.out_path = os.path.join(run.dir, name + ".out")
        self.err_path = os.path.join(run.dir, name + ".err")
        self.report_path = os.path.join(run.dir, name + ".report")
        self.go_path = os.path.join(run.dir, name + ".go")
        env = dict(env, FW_GO=self.go_path)
        self.started = time.monotonic_ns()
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.p = subprocess.Popen([sys.executable, script, "job"] + args,
                                      env=run.env(name, env), stdout=out, stderr=err,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.p.pid
        self.rc = None
        self.timed_out = False

    def wait(self, seconds):
        """The exit code; past the deadline the job is killed and it fails."""
        if self.rc is None:
            try:
                self.rc = self.p.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                self.timed_out = True
                self.kill()
                self.rc = self.p.wait()
        return self.rc

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.p.wait()

    def stop(self, seconds=30):
        """SIGTERM (a job's loop ends at its next iteration), then wait."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return self.wait(seconds)

    def await_ready(self, seconds, together=()):
        """Until the job has said FWREADY (its set-up done, see ready()); a
        job that died before is judged at once as expect_ok judges it."""
        def said():
            if self.p.poll() is not None:
                self.expect_ok(0, together)
                raise Fail("%s ended before it was ready" % self.name)
            return "FWREADY" in self.out()
        await_(said, seconds, "%s ready" % self.name)
        return self

    def go(self):
        """Let a ready job run its loop."""
        open(self.go_path, "w").close()

    def ran_kernels(self, n=1):
        """At least n kernels of this job in the trace."""
        return sum(k["pid"] == self.pid for k in self.run.kernels()) >= n

    def out(self):
        return _read(self.out_path)

    def err(self):
        return _read(self.err_path)

    def did(self):
        """The job's FWDID line, as a dict ({} when it printed none)."""
        for line in self.out().splitlines():
            if line.startswith("FWDID "):
                return json.loads(line[6:])
        return {}

    def report(self):
        """libsalus's report of the job's own process ({} when none)."""
        return report_of(self.report_path, self.pid)

    def why(self):
        """What a failed job said last: for the FAIL and SKIP lines."""
        if self.timed_out:
            what = "timed out"
        elif self.rc is not None and self.rc < 0:
            what = "killed by signal %d" % -self.rc
        else:
            what = "exit %s" % self.rc
        lines = [l.strip() for l in self.err().splitlines() if l.strip(" ^~\t")]
        said = [l for l in lines if l.startswith(("simgpu", "salus["))][:4]
        at, where = _fault_frame(lines)
        tail = [l for l in lines[:at][-2:] if l not in said]
        return "%s %s: %s" % (self.name, what, " | ".join(said + tail + where)
                              or "(no stderr)")

    def expect_ok(self, seconds, together=()):
        """Wait; a job that failed under libsalus is run again bare, with
        the jobs it cannot run without (together: a distributed job's other
        ranks): if it fails there too, simgpu cannot carry it and the case
        is skipped.  The run's other jobs are ended first."""
        rc = self.wait(seconds)
        if rc == 0:
            return self
        why = self.why()
        if not self.run.salus:
            raise Fail(why)
        for j in self.run.jobs:
            j.kill()
        bare = Run(self.run.name + "-bare", self.run.memory, self.run.devices, salus=False,
                   env=self.run.common)
        try:
            again = [bare.start(j.name, j.args, j.extra, j.script) for j in (self,) + tuple(together)]
            for b in again:
                b.go()
            for b in again:
                if b.wait(BARE_S) != 0:
                    raise Skip("without libsalus too, simgpu cannot carry it: " + b.why())
        finally:
            bare.close()
        raise Fail("fails under libsalus, runs without it: " + why)


def _fault_frame(lines):
    """Where faulthandler's dump (PYTHONFAULTHANDLER) starts in a job's
    stderr lines, and what it says: its first line and the innermost frame
    of the thread that was killed ("Fatal Python error: ...", "in File ...");
    (len(lines), []) when there is none."""
    for i, l in enumerate(lines):
        if l.startswith("Fatal Python error"):
            cur = [k for k in range(i, len(lines)) if lines[k].startswith("Current thread")]
            frame = lines[cur[0] + 1] if cur and cur[0] + 1 < len(lines) else ""
            return i, [l] + (["in " + frame] if frame.startswith("File") else [])
    return len(lines), []


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def await_(pred, seconds, what):
    """Poll pred until it holds or the deadline passes (then Fail)."""
    end = time.monotonic() + seconds
    pause = 0.002
    while True:
        if pred():
            return
        if time.monotonic() > end:
            raise Fail("%s: not within %g s" % (what, seconds))
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def beside_peer(run, name, args, env, peer_env, seconds=300):
    """The job `name` run to its end beside a training peer (the scenario's
    "peer" role): both ready, the peer let go first, the job once the peer
    ran kernels, the peer stopped after the job ended well.  The peer, the
    job, and the job's go and end times (now_ns)."""
    peer = run.start("peer", ["peer"], peer_env)
    job = run.start(name, args, env)
    peer.await_ready(240)
    job.await_ready(240)
    peer.go()
    await_(lambda: peer.ran_kernels(20), 60, "the peer training")
    go = now_ns()
    job.go()
    job.expect_ok(seconds)
    done = now_ns()
    peer.stop()
    peer.expect_ok(120)
    return peer, job, go, done


# ---- libsalus's report and simgpu's trace -------------------------------------------


def report_of(path, pid):
    for line in _read(path).splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("pid") == pid:
            return r
    return {}


def trace_load(path, kinds=("kernel", "copy", "memset")):
    """The trace's lines of those kinds sorted by start, with the cut lines
    applied: work of a context that went with it queued ends at the cut,
    and work that had not started then never ran."""
    rows, cuts = [], []
    for line in _read(path).splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "cut":
            cuts.append(r)
        elif r.get("kind") in kinds:
            rows.append(r)
    kept = []
    for r in rows:
        for c in cuts:
            if (c["pid"] == r["pid"] and c["device"] == r["device"]
                    and c.get("context", 0) in (0, r["context"]) and r["submit_ns"] <= c["end_ns"]):
                if r["start_ns"] >= c["end_ns"]:
                    r = None
                    break
                r["end_ns"] = min(r["end_ns"], c["end_ns"])
        if r is not None:
            kept.append(r)
    kept.sort(key=lambda r: r["start_ns"])
    return kept


def busy_ns(kernels, pid, t0=0, t1=1 << 63):
    """GPU time of pid's kernels within [t0, t1)."""
    t = 0
    for k in kernels:
        if k["pid"] == pid:
            a, b = max(k["start_ns"], t0), min(k["end_ns"], t1)
            t += max(0, b - a)
    return t


def switches(kernels):
    """(the index of the last kernel before each change of process)."""
    return [i for i in range(len(kernels) - 1) if kernels[i]["pid"] != kernels[i + 1]["pid"]]


def mid_iteration_switches(kernels, pid, iter_ends):
    """Times pid lost the GPU inside an iteration: a switch away from it
    after which its next kernel was submitted before it ended an iteration
    (iter_ends: the CLOCK_MONOTONIC ns at which its syncs returned)."""
    mine = [i for i, k in enumerate(kernels) if k["pid"] == pid]
    bad = []
    for a, b in zip(mine, mine[1:]):
        if b == a + 1:
            continue                       # no other process in between
        last, nxt = kernels[a], kernels[b]
        if not any(last["end_ns"] <= t <= nxt["submit_ns"] for t in iter_ends):
            bad.append((last, nxt))
    return bad


def procs(table):
    """What salus-top --json says of each process of the table, by pid."""
    top = os.path.join(BUILD, "bin", "salus-top")
    try:
        out = subprocess.run([top, "--json", "--once", "-t", table], capture_output=True,
                             text=True, timeout=20).stdout
        doc = json.loads(out)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    found = {}

    def walk(v):
        if isinstance(v, dict):
            if "pid" in v and "mem_used_bytes" in v:
                found[v["pid"]] = v
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(doc)
    return found


# ---- what a job says ------------------------------------------------------------------


def did(**what):
    print("FWDID " + json.dumps(what, sort_keys=True))
    sys.stdout.flush()


def ready(seconds=600):
    """In a job: say FWREADY and wait for the driver's go (Job.go), so that
    the driver starts loops together or in order, whatever each
    interpreter's start took.  Past the deadline the job gives up."""
    print("FWREADY")
    sys.stdout.flush()
    go, end = os.environ["FW_GO"], time.monotonic() + seconds
    while not os.path.exists(go):
        if time.monotonic() > end:
            sys.exit("fwlib: no go within %d s" % seconds)
        time.sleep(0.005)


def now_ns():
    return time.monotonic_ns()            # CLOCK_MONOTONIC: simgpu's clock


class Stop:
    """SIGTERM asks a job's loop to end at its next iteration."""

    def __init__(self):
        self.asked = False
        signal.signal(signal.SIGTERM, self._ask)

    def _ask(self, *_):
        self.asked = True


# ---- main ---------------------------------------------------------------------------


def main(job, cases):
    """job: the job's program (args: the rest of argv); cases: [(name, fn)]."""
    if len(sys.argv) > 1 and sys.argv[1] == "job":
        job(sys.argv[2:])
        return
    pick = os.environ.get("FW_CASES", "")
    failed = 0
    for name, fn in cases:
        if pick and not any(p and p in name for p in pick.split(",")):
            continue
        start = time.monotonic()
        try:
            fn()
            line = "PASS %s" % name
        except Skip as e:
            line = "SKIP %s: %s" % (name, e)
        except Fail as e:
            line = "FAIL %s: %s" % (name, e)
            failed += 1
        except Exception as e:  # a driver's own fault is the case's failure too
            traceback.print_exc()
            line = "FAIL %s: %s: %s" % (name, type(e).__name__, e)
            failed += 1
        print("%s  (%.0fs)" % (line, time.monotonic() - start))
        sys.stdout.flush()
    sys.exit(1 if failed else 0)
