"""What each experiment runs, drawn from fixed seeds.

A Job is one salus-train or salus-infer process: its argv (without the
program), its arrival time, and what the analysis needs to know of it
(iterations, expected standalone length, memory).  Nothing here runs
anything.
"""
import random
from dataclasses import dataclass, field
from typing import List

from . import config


@dataclass
class Job:
    name: str
    program: str                # "train" or "infer"
    args: List[str]
    arrival_s: float
    iterations: int = 0         # declared length (SALUS_ITERATIONS), 0: unknown
    gpu_s: float = 0.0          # GPU time of the whole job, standalone
    length_s: float = 0.0       # standalone length (GPU + host time)
    peak: int = 0               # bytes held at most (reservation under Salus)
    model: str = ""
    minutes: int = 0            # the paper's length class (training)
    declared_s: float = 0.0     # the length its user declares (SALUS_LENGTH_MS):
                                # its class, compressed; 0: none
    env: dict = field(default_factory=dict)


def compressed_train_job(preset, iterations, name, arrival_s, seed, iter_scale=config.ITER_SCALE):
    """A salus-train job of `preset` with its iteration time divided by
    iter_scale: iter_scale times fewer kernels of the model's own length."""
    kernels = max(2, round(preset.kernels / iter_scale))
    spins = kernels - kernels // 8
    iter_ms = preset.iter_ms / iter_scale
    host_ms = preset.host_ms / iter_scale
    args = ["--preset", preset.name, "--iterations", str(iterations),
            "--kernels", str(kernels), "--kernel-us", f"{iter_ms * 1000.0 / spins:.3f}",
            "--host-ms", f"{host_ms:.4f}", "--seed", str(seed), "--name", name,
            "--oom", "fail"]
    aux_ms = (kernels // 8) * 0.010          # simgpu: 10 us per aux kernel
    return Job(name=name, program="train", args=args, arrival_s=arrival_s,
               iterations=iterations, gpu_s=iterations * (iter_ms + aux_ms) / 1000.0,
               length_s=iterations * (iter_ms + aux_ms + host_ms) / 1000.0,
               peak=preset.peak, model=preset.name)


def iter_scale_of(preset):
    """How much a preset's iterations are shortened: ITER_SCALE, less for
    models whose iterations would drop below MIN_ITER_MS.  A job's length is
    shortened by the same factor whatever its model (the count makes up)."""
    it = preset.iter_ms + preset.host_ms
    return max(1.0, min(float(config.ITER_SCALE), it / config.MIN_ITER_MS))


def training_trace(scale, train_presets, arrival_seed=None):
    """About 100 jobs of the paper's mix: a model and batch size drawn
    uniformly among the 45 workloads, a length of 1, 5 or 10 minutes
    (uniformly), compressed; Poisson arrivals whose mean gap makes the
    offered load `scale.load` while jobs arrive.  arrival_seed: the same
    jobs in another arrival order (the repeats of the paging runs); by
    default scale.seed + 1."""
    rng = random.Random(scale.seed)
    length_scale = config.ITER_SCALE * scale.count_scale
    drawn = []
    for i in range(scale.train_jobs):
        p = rng.choice(train_presets)
        minutes = rng.choice(config.JOB_MINUTES)
        s_iter = iter_scale_of(p)
        iters = max(2, round(p.iterations * minutes * s_iter / length_scale))
        drawn.append((p, minutes, iters, s_iter))
    jobs = [compressed_train_job(p, iters, f"j{i:03d}-{p.name}", 0.0, seed=1000 + i,
                                 iter_scale=s_iter)
            for i, (p, minutes, iters, s_iter) in enumerate(drawn)]
    for j, (_, minutes, _, _) in zip(jobs, drawn):
        j.minutes = minutes
        j.declared_s = minutes * 60.0 / length_scale
    mean_len = sum(j.length_s for j in jobs) / len(jobs)
    mean_gap = mean_len / scale.load
    arng = random.Random(scale.seed + 1 if arrival_seed is None else arrival_seed)
    t = 0.0
    for i, j in enumerate(jobs):
        if i:
            t += arng.expovariate(1.0 / mean_gap)
        j.arrival_s = t
    return jobs, {"mean_gap_s": mean_gap, "mean_length_s": mean_len}


def hyper_jobs(scale, preset):
    """Hyper-parameter tuning: scale.hyper_jobs jobs of one model, all
    submitted at once, each scale.hyper_job_s long alone, at the model's
    real iteration time (host gaps included)."""
    it_ms = preset.iter_ms + preset.host_ms
    iters = max(2, round(scale.hyper_job_s * 1000.0 / it_ms))
    return [compressed_train_job(preset, iters, f"h{i:02d}-{preset.name}", 0.0,
                                 seed=2000 + i, iter_scale=1)
            for i in range(scale.hyper_jobs)]


def inference_jobs(scale, services, copies, seconds, slo_ms):
    """`copies` services of each model, started together (10 ms apart),
    Poisson requests at scale.infer_rate for `seconds`."""
    jobs = []
    k = 0
    for c in range(copies):
        for s in services:
            name = f"i{k:02d}-{s.model}"
            args = ["--rate", f"{scale.infer_rate:g}", "--seconds", f"{seconds:g}",
                    "--kernels", str(s.kernels),
                    "--kernel-us", f"{s.kernel_us:.3f}", "--mem", str(s.mem),
                    "--slo-ms", f"{slo_ms:g}", "--seed", str(3000 + k), "--name", name,
                    "--oom", "fail"]
            jobs.append(Job(name=name, program="infer", args=args, arrival_s=0.01 * k,
                            peak=s.mem + 16 * config.MiB, model=s.model))
            k += 1
    return jobs
