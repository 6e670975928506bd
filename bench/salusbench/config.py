"""The sizes of a run and where things are.

Every experiment reads its parameters from one Scale, so that `make bench`
(full), `make bench-quick` (quick) and the smoke test (tiny) run the same
code on different sizes.  Time compression (see report): a job's iteration
time is divided by ITER_SCALE by launching ITER_SCALE times fewer kernels of
the model's own kernel length; its iteration count is divided by
count_scale.  Seeds are fixed: two runs of one scale draw the same jobs.
"""
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SALUS_BENCH_BUILD", os.path.join(ROOT, "build"))
TRAIN = os.path.join(BUILD, "bin", "salus-train")
INFER = os.path.join(BUILD, "bin", "salus-infer")
LIBSALUS = os.path.join(BUILD, "libsalus.so")
SIMGPU_DIR = os.path.join(BUILD, "sim")
SALUS = os.path.join(BUILD, "bin", "salus")      # removes a run's table (runner)

def load_json(out_dir, name):
    """The JSON file `name` of out_dir (a step's result), or None when it is
    missing or unreadable."""
    try:
        with open(os.path.join(out_dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def use_snapshot(out_dir):
    """Run from a private copy of the programs, libsalus and simgpu (under
    out_dir/.build), so that a rebuild of build/ during a run (by someone
    else working on the tree) cannot mix two versions in one experiment:
    a new libsalus refuses a table made by the old one."""
    global TRAIN, INFER, LIBSALUS, SIMGPU_DIR, SALUS
    snap = os.path.join(out_dir, ".build")
    files = {"bin/salus-train": TRAIN, "bin/salus-infer": INFER, "libsalus.so": LIBSALUS,
             "sim/libcuda.so.1": os.path.join(SIMGPU_DIR, "libcuda.so.1")}
    if os.path.exists(SALUS):
        files["bin/salus"] = SALUS
    for ext in ("cubin", "ptx"):            # salus-train finds <bin>/../workloads/kernels.*
        src = os.path.join(os.path.dirname(os.path.dirname(TRAIN)), "workloads", f"kernels.{ext}")
        if os.path.exists(src):
            files[f"workloads/kernels.{ext}"] = src
    for rel, src in files.items():
        dst = os.path.join(snap, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = dst + ".tmp"
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    link = os.path.join(snap, "sim", "libcuda.so")
    if not os.path.lexists(link):
        os.symlink("libcuda.so.1", link)
    TRAIN = os.path.join(snap, "bin", "salus-train")
    INFER = os.path.join(snap, "bin", "salus-infer")
    LIBSALUS = os.path.join(snap, "libsalus.so")
    SIMGPU_DIR = os.path.join(snap, "sim")
    if "bin/salus" in files:
        SALUS = os.path.join(snap, "bin", "salus")


GPU_MEMORY = os.environ.get("SALUS_BENCH_GPU_MEMORY", "16G")   # the paper's P100: 16 GB
MiB = 1 << 20

# The paper's training workloads: 15 models, 3 batch sizes each (presets.c).
TRAIN_FAMILIES = ["vgg11", "vgg16", "vgg19", "resnet50", "resnet101", "resnet152",
                  "googlenet", "alexnet", "overfeat", "inception3", "inception4",
                  "speech", "seq2seq", "vae", "superres"]
JOB_MINUTES = [1, 5, 10]    # the paper's jobs were sized to 1, 5 or 10 minutes
ITER_SCALE = 20             # iteration time / 20 (fewer kernels, same length) ...
MIN_ITER_MS = 2.0           # ... but not below 2 ms (GPU + host), where wake-up
                            # latencies of a loaded host would dominate
POLICIES = ["fifo", "srtf", "fair", "pack", "none"]


@dataclass
class Scale:
    name: str
    # training trace
    train_jobs: int
    count_scale: int            # job length / (ITER_SCALE * count_scale), see tracegen
    load: float                 # offered load while jobs arrive (work / arrival span)
    # hyper-parameter tuning
    hyper_models: List[str]
    hyper_jobs: int
    hyper_job_s: float          # standalone length of one tuning job, seconds
    # inference
    infer_models: int           # how many of the 14 models
    infer_copies: List[int]     # sweep: copies of each model on one GPU
    infer_seconds: float
    infer_rate: float = 2.0     # requests per second per service (Poisson)
    infer_slo_ms: float = 100.0
    seed: int = 1
    publish: bool = False       # copy the report to bench/REPORT.md + bench/report/
    unbounded: bool = True      # training: fifo and srtf again without memory limits
    swap: bool = True           # training: the Salus policies again with paging on
                                # (not in quick: CI's bench-quick keeps its length)
    swap_repeats: int = 1       # training: runs of each paging row (and of the
                                # same policy without paging), each with its own
                                # arrival order; the report gives medians and spreads
    extra: dict = field(default_factory=dict)


SCALES = {
    "full": Scale("full", train_jobs=100, count_scale=30, load=2.0,
                  hyper_models=["superres_128", "resnet50_50"], hyper_jobs=16, hyper_job_s=1.5,
                  infer_models=14, infer_copies=[1, 3, 4], infer_seconds=12.0,
                  publish=True, swap_repeats=3),
    "quick": Scale("quick", train_jobs=16, count_scale=40, load=2.0,
                   hyper_models=["superres_128", "resnet50_50"], hyper_jobs=6, hyper_job_s=0.6,
                   infer_models=14, infer_copies=[1, 3], infer_seconds=3.0, swap=False),
    "tiny": Scale("tiny", train_jobs=4, count_scale=400, load=2.0,
                  hyper_models=["superres_128"], hyper_jobs=2, hyper_job_s=0.15,
                  infer_models=2, infer_copies=[1], infer_seconds=0.5, unbounded=False,
                  swap=False),
}


def scale(name):
    if name not in SCALES:
        raise SystemExit(f"bench: unknown scale '{name}' (one of {', '.join(SCALES)})")
    return SCALES[name]
