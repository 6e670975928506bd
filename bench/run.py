#!/usr/bin/env python3
"""Run the paper's experiments over simgpu and write the report.

  bench/run.py STEP... [--scale full|quick|tiny] [--out DIR]

STEP: training, hyperparam, inference, mixed, slicing, pytorch (experiments: run,
then write <step>.json under DIR; pytorch needs the frameworks' environment,
FW_ENV or build/frameworks, and is skipped with its reason without it), micro (gather the scheduler's and memory module's
microbenchmark JSON), report (report.md, summary.json and the plots from
what DIR holds), all (every one, in that order), check FILE (exit 0 when a
summary.json has every key, for tests), judge FILE (the paging rows run after
run of a training.json: medians, spreads and goals on stdout; exit 1 when
a job failed under Salus in any of its runs, each named on stderr).  Needs `make` first: it runs
build/bin/salus-train, salus-infer, build/libsalus.so and build/sim.
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from salusbench import config  # noqa: E402

STEPS = ["training", "hyperparam", "inference", "mixed", "slicing", "pytorch", "micro",
         "report"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("steps", nargs="+", help="|".join(STEPS + ["all", "check FILE", "judge FILE"]))
    ap.add_argument("--scale", default="full", choices=sorted(config.SCALES))
    ap.add_argument("--out", default=os.path.join(config.ROOT, "bench", "results"))
    a = ap.parse_args(argv)
    if a.steps[0] == "check":
        from salusbench import report
        if len(a.steps) != 2:
            ap.error("check takes one FILE")
        problems = report.check_summary(a.steps[1])
        for p in problems:
            print(f"bench: {a.steps[1]}: {p}", file=sys.stderr)
        return 1 if problems else 0
    if a.steps[0] == "judge":
        if len(a.steps) != 2:
            ap.error("judge takes one FILE")
        return judge(a.steps[1])
    steps = STEPS if "all" in a.steps else a.steps
    for s in steps:
        if s not in STEPS:
            ap.error(f"unknown step '{s}'")
    for path in (config.TRAIN, config.INFER, config.LIBSALUS,
                 os.path.join(config.SIMGPU_DIR, "libcuda.so.1")):
        if not os.path.exists(path):
            print(f"bench: {path} is not built: run make first", file=sys.stderr)
            return 2
    os.makedirs(a.out, exist_ok=True)
    if any(s in ("training", "hyperparam", "inference", "mixed", "slicing", "pytorch", "report")
           for s in steps):
        config.use_snapshot(a.out)
    sc = config.scale(a.scale)
    failed = []
    for s in steps:
        t = time.monotonic()
        mod = __import__(f"salusbench.{s}", fromlist=["run"])
        got = mod.run(sc, a.out)
        if s == "report":
            failed += got
        took = time.monotonic() - t
        record_time(a.out, a.scale, s, took)
        print(f"bench: {s} ({a.scale}) done in {took:.0f} s", flush=True)
    for what in failed:
        print(f"bench: failed jobs under Salus: {what}", file=sys.stderr)
    return 1 if failed else 0


def judge(path):
    from salusbench import repeats, report_repeats
    try:
        with open(path) as f:
            tr = json.load(f)
    except (OSError, ValueError) as e:
        print(f"bench: {path}: {e}", file=sys.stderr)
        return 2
    print(report_repeats.section(tr) or "bench: fewer than two runs of the paging rows")
    failed = repeats.failed_runs(tr)
    for what in failed:
        print(f"bench: failed jobs under Salus: {what}", file=sys.stderr)
    return 1 if failed else 0


def record_time(out, scale, step, seconds):
    """timing.json: wall seconds of each step of the latest run of a scale."""
    path = os.path.join(out, "timing.json")
    try:
        with open(path) as f:
            t = json.load(f)
    except (OSError, ValueError):
        t = {}
    if t.get("scale") != scale:
        t = {"scale": scale, "steps": {}, "load": {}}
    t["steps"][step] = round(seconds, 1)
    t.setdefault("load", {})[step] = round(os.getloadavg()[0], 2)
    with open(path, "w") as f:
        json.dump(t, f, indent=1)


def stop(signum, frame):
    """SIGTERM (and SIGINT, even in a background job): leave through the
    runners' cleanup, which kills the jobs and removes their shared memory."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.exit(main(sys.argv[1:]))
