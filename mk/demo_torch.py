#!/usr/bin/env python3
"""make demo-torch: three unmodified PyTorch training jobs share one
simulated GPU under Salus, then the same jobs run without it; a table
compares what each got and says what Salus did.

  python3 mk/demo_torch.py <frameworks env dir> <build dir>

The jobs are bench/torch/train.py, a plain PyTorch program (no Salus in
it): a residual CNN (cuDNN), a transformer encoder and an MLP (cuBLAS),
over simgpu with its shape model of kernel durations (sim/README.md,
"Kernel durations"), run by bench/salusbench/torchjobs.py.  With Salus
they are started by `salus run --name N --priority P --policy priority`:
the GPU goes to the highest priority with work, handed over at the
iteration boundaries libsalus finds by itself (each step's
torch.cuda.synchronize()); make bench's pytorch step has every policy.  Without Salus simgpu's engine time-slices
their kernels, with a 100 us context switch between processes, as the
driver does.  The high-priority MLP arrives once the other two are
training.  Runs with Debian's python3 (the standard library only).
"""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    fw_env, build = argv
    os.environ["SALUS_BENCH_BUILD"] = os.path.abspath(build)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from salusbench import config, torchjobs
    for f in (config.LIBSALUS, config.SALUS, os.path.join(config.SIMGPU_DIR, "libcuda.so.1")):
        if not os.path.exists(f):
            sys.exit(f"demo-torch: {f} is not built: run make first")
    python, why = torchjobs.fw_python(fw_env)
    if not python:
        sys.exit("demo-torch: " + why)
    # After the CNN's set-up and about 15 of its iterations, and about 10 of
    # the transformer's, the MLP comes.
    jobs = [torchjobs.TorchJob("long", "cnn", 500, priority=10),
            torchjobs.TorchJob("mid", "transformer", 400, priority=50),
            torchjobs.TorchJob("short", "mlp", 600, priority=90, after_kernels=3000)]
    print("Salus demo with PyTorch: three unmodified training jobs (bench/torch/train.py) share\n"
          "one simulated GPU (simgpu, kernel durations from their launch shapes).\n"
          "  long   a residual CNN, batch 256,            priority 10, 500 iterations\n"
          "  mid    a transformer encoder, batch 64,      priority 50, 400 iterations\n"
          "  short  an MLP 1024-4096-4096-1000, batch 4096, priority 90, 600 iterations,\n"
          "         arriving once the other two train\n"
          "Under Salus with the priority policy (the GPU to the highest priority that has work,\n"
          "handed over at iteration boundaries), started with, for instance:\n"
          "  salus run --name short --priority 90 --policy priority -- \\\n"
          "      python train.py --model mlp --iterations 600\n",
          flush=True)
    figs, shares = {}, {}
    with tempfile.TemporaryDirectory(prefix="salus-demo-torch-") as tmp:
        for mode in ("priority", "none"):
            print("-- with Salus ..." if mode == "priority" else
                  "-- the same jobs without Salus (the GPU time-slices between them) ...",
                  flush=True)
            run = torchjobs.run(jobs, mode, python, tmp, mode, deadline_s=600)
            figs[mode] = torchjobs.figures(run)
            shares[mode] = torchjobs.share_while(run, "short")
            bad = [(n, j["why"]) for n, j in figs[mode]["jobs"].items() if not j["ok"]]
            if bad:
                for n, why in bad:
                    print(f"demo-torch: job {n} failed: {why}", file=sys.stderr)
                return 1
    table(jobs, figs, shares)
    return 0


def f(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def table(jobs, figs, shares):
    s, n = figs["priority"], figs["none"]
    print()
    print(f"{'':19}{'-------------- with Salus --------------':42}{'--- without Salus ---'}")
    row = "{:<6} {:<11} {:>4}  {:>6} {:>6} {:>9} {:>6} {:>7}   {:>6} {:>6} {:>6}"
    print(row.format("job", "model", "prio", "JCT s", "loop s", "iter f/t", "GPU%*", "handed",
                     "JCT s", "loop s", "GPU%*"))
    for j in jobs:
        a, b = s["jobs"][j.name], n["jobs"][j.name]
        print(row.format(j.name, j.model, j.priority, f(a["jct_s"]), f(a["loop_s"]),
                         f"{a['found_iterations']}/{a['true_iterations']}",
                         f"{100 * shares['priority'].get(j.name, 0):.0f}%", a["handed_to"],
                         f(b["jct_s"]), f(b["loop_s"]),
                         f"{100 * shares['none'].get(j.name, 0):.0f}%"))
    print()
    print(f"{'GPU busy (kernel span)':26}{f(100 * (s['gpu_busy'] or 0), 0) + '%':42}"
          f"{f(100 * (n['gpu_busy'] or 0), 0)}%")
    print(f"{'context switches':26}{str(s['context_switches']) + ' (100 us each)':42}"
          f"{n['context_switches']} (100 us each)")
    print(f"{'average JCT':26}{f(s['avg_jct_s']) + ' s':42}{f(n['avg_jct_s'])} s")
    print("* GPU%: share of the GPU's kernel time while short ran its kernels; iter f/t: the\n"
          "  iterations libsalus's detector found / the true count (the loop's and the warm-up\n"
          "  step); handed: times the GPU went to the job from another process; JCT: from the\n"
          "  process's start (the interpreter's and the model's set-up included) to its exit.")
    print()
    sh = s["jobs"]["short"]
    found_ok = all(x["found_iterations"] == x["true_iterations"] for x in s["jobs"].values())
    lines = [f"With Salus the priority-90 MLP got {100 * shares['priority'].get('short', 0):.0f}% "
             f"of the GPU while it ran ({100 * shares['none'].get('short', 0):.0f}% without) "
             f"and its loop took {f(sh['loop_s'])} s instead of "
             f"{f(n['jobs']['short']['loop_s'])} s; the GPU changed processes "
             f"{s['context_switches']} times instead of {n['context_switches']}.",
             "The others gave way: " + ", ".join(
                 f"{name}'s loop took {f(s['jobs'][name]['loop_s'])} s instead of "
                 f"{f(n['jobs'][name]['loop_s'])} s" for name in ("long", "mid")) +
             (f"; the GPU was busy {100 * s['gpu_busy']:.0f}% of the kernels' span instead of "
              f"{100 * n['gpu_busy']:.0f}%: a job holds the GPU through its host phases, "
              f"which on a loaded host are long" if s["gpu_busy"] and n["gpu_busy"] and
              s["gpu_busy"] < n["gpu_busy"] - 0.05 else "") + ".",
             "libsalus found " + ("every job's iterations exactly" if found_ok else
                                  "iterations as the column shows") +
             ", from the scripts' own synchronize calls, with no change to the scripts: "
             + ", ".join(f"{x['launches_per_iteration']:.0f} launches per iteration for "
                         f"{name}" for name, x in s["jobs"].items()
                         if x["launches_per_iteration"]) + "."]
    for t in lines:
        wrap(t, 92)


def wrap(text, width):
    line = ""
    for w in text.split():
        if line and len(line) + 1 + len(w) > width:
            print(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    if line:
        print(line)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
