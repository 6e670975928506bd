"""Experiment 6: real PyTorch training jobs sharing one GPU.

bench/torch/train.py, a plain PyTorch program, as three jobs (a residual
CNN at priority 10, a transformer encoder at 50, an MLP at 90), arriving
one after the other, each once the ones before it have begun on the GPU
(launched `after_kernels` kernels; quick: two of them at once), on one simgpu with its shape model
of kernel durations (torchjobs.py, sim/README.md "Kernel durations"),
under each Salus policy and without Salus (`none`: simgpu's engine
time-slices the processes' kernels with its context-switch penalty, as
the driver does).  Per policy: the jobs' average JCT and the makespan,
the context switches and GPU busy fraction of the trace, and per job its
JCT, loop time, the iterations libsalus's detector found beside the true
count, and the launches per iteration libsalus saw.

The quick scale runs two of the jobs, shorter, under fair and none only
(about 25 s);
the tiny scale (tests/test_bench) runs none.  Without the frameworks'
environment (FW_ENV, default build/frameworks, made by mk/fwenv.sh) the
step is skipped, and the reason is in pytorch.json, the summary and the
report.  Writes pytorch.json: {"scale", "skipped" (null or why), "jobs":
[the job specs], "policies": {policy: torchjobs.figures(...)}, "sim_env",
"load"}.
"""
import json
import os

from . import torchjobs
from .torchjobs import TorchJob

# A later job arrives once the earlier ones have begun on the GPU (their
# first kernel), so that its interpreter's start and set-up (seconds on a
# loaded host) overlap their set-up and loops.  Quick: two jobs at once.
FULL = [TorchJob("cnn", "cnn", 1000, priority=10),
        TorchJob("transformer", "transformer", 400, priority=50, after_kernels=1),
        TorchJob("mlp", "mlp", 800, priority=90, after_kernels=1)]
QUICK = [TorchJob("cnn", "cnn", 600, priority=10),
         TorchJob("mlp", "mlp", 400, priority=90)]
SIZES = {"full": (FULL, ["fair", "priority", "srtf", "fifo", "none"]),
         "quick": (QUICK, ["fair", "none"])}


def run(scale, out_dir):
    result = {"scale": scale.name, "skipped": None, "jobs": [], "policies": {},
              "sim_env": {k: os.path.basename(v) if k == "SIMGPU_KERNEL_TABLE" else v
                          for k, v in torchjobs.SIM_ENV.items()}}
    python, why = torchjobs.fw_python()
    if scale.name not in SIZES:
        why = (f"the {scale.name} scale runs no framework (an interpreter importing torch "
               f"takes seconds): make bench and make bench-quick run it")
    if scale.name in SIZES and python:
        jobs, policies = SIZES[scale.name]
        result["jobs"] = [dict(j.__dict__) for j in jobs]
        workdir = os.path.join(out_dir, "pytorch")
        for pol in policies:
            r = torchjobs.run(jobs, pol, python, workdir, pol, deadline_s=900)
            fig = torchjobs.figures(r)
            result["policies"][pol] = fig
            found = ", ".join(f"{n} {j['found_iterations']}/{j['true_iterations']}"
                              for n, j in fig["jobs"].items())
            print(f"bench: pytorch {pol}: avg JCT {fig['avg_jct_s'] or 0:.2f} s, makespan "
                  f"{fig['makespan_s'] or 0:.2f} s, {fig['context_switches']} switches, "
                  f"failed {fig['failed_jobs']}; iterations found/true: {found}", flush=True)
            for n, j in fig["jobs"].items():
                if not j["ok"]:
                    print(f"bench: pytorch {pol}: job {n} failed: {j['why']}", flush=True)
    else:
        result["skipped"] = why
        print(f"bench: pytorch skipped: {why}", flush=True)
    result["load"] = round(os.getloadavg()[0], 2)
    with open(os.path.join(out_dir, "pytorch.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
