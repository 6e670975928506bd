"""Workload figures, read from the one table that holds them.

salus-train's preset table (workloads/presets.c, printed by
`salus-train --preset list`) is the single source of the training figures
and of their sources.  Inference services are derived from it (below), so
that no figure is typed twice.
"""
import os
import re
import subprocess
from dataclasses import dataclass

from . import config

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    """'1.5G' -> bytes (the table prints one decimal: +-0.05 of the unit)."""
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)", text)
    if not m:
        raise ValueError(f"bad size '{text}'")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def size_error(text):
    """The most the printed size can be below the true one."""
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)", text)
    return 0 if "." not in m.group(1) else int(0.05 * _UNITS[m.group(2)])


@dataclass
class Preset:
    name: str
    iter_ms: float      # GPU time per iteration (salus_spin kernels)
    kernels: int
    mem: int            # bytes, persistent
    iter_mem: int       # bytes, per iteration
    host_ms: float
    iterations: int     # one minute of training
    source: str
    mem_slack: int = 0  # printing error of mem + iter_mem
    mem_text: str = ""  # as the table prints them
    iter_mem_text: str = ""

    @property
    def peak(self):
        """What the job holds at most: a bound, for admission."""
        return self.mem + self.iter_mem + self.mem_slack

    @property
    def family(self):
        return self.name.rsplit("_", 1)[0]


def env_simgpu():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = config.SIMGPU_DIR + (":" + env["LD_LIBRARY_PATH"]
                                                  if env.get("LD_LIBRARY_PATH") else "")
    return env


def load():
    """{name: Preset} from `salus-train --preset list`."""
    out = subprocess.run([config.TRAIN, "--preset", "list"], env=env_simgpu(),
                         capture_output=True, text=True, check=True).stdout
    presets = {}
    for line in out.splitlines()[1:]:
        f = line.split(None, 7)
        if len(f) < 7:
            continue
        presets[f[0]] = Preset(name=f[0], iter_ms=float(f[1]), kernels=int(f[2]),
                               mem=parse_size(f[3]), iter_mem=parse_size(f[4]),
                               host_ms=float(f[5]), iterations=int(f[6]),
                               source=f[7] if len(f) > 7 else "",
                               mem_slack=size_error(f[3]) + size_error(f[4]),
                               mem_text=f[3], iter_mem_text=f[4])
    return presets


def training_presets(presets):
    """The paper's 45 training workloads, in a fixed order."""
    out = [p for fam in config.TRAIN_FAMILIES for p in presets.values() if p.family == fam]
    if not out:
        raise SystemExit("bench: salus-train has none of the paper's presets (vgg16_25, ...)")
    return out


# ---- inference services --------------------------------------------------
# The paper's inference experiment served its models at small batches; ours
# serve batch 1.  A request runs the forward pass of one image:
#   GPU time = the training iteration of the model's smallest batch b, / b
#     (a forward pass is about a third of a training step, and batch 1 uses
#     the GPU about 3x less efficiently than batch 25: the two cancel),
#     at least 1 ms;
#   kernels = a third of a training step's (the forward ones), at least 2;
#   memory = fp32 weights (the parameter counts cited in presets.c) + 64 MiB
#     of activations and workspace for one image (an estimate).
# seq2seq is left out (its "batch" is a model size): 14 models.
INFER_PARAMS_M = {"vgg11": 132.9, "vgg16": 138.4, "vgg19": 143.7, "resnet50": 25.6,
                  "resnet101": 44.5, "resnet152": 60.2, "googlenet": 6.8, "alexnet": 61.1,
                  "overfeat": 145.0, "inception3": 23.8, "inception4": 42.7, "speech": 30.0,
                  "vae": 1.3, "superres": 0.06}
INFER_WORKSPACE = 64 * config.MiB


@dataclass
class Service:
    model: str
    request_ms: float
    kernels: int
    mem: int

    @property
    def kernel_us(self):
        spins = self.kernels - self.kernels // 8
        return self.request_ms * 1000.0 / spins


def inference_services(presets):
    services = []
    for fam, params in INFER_PARAMS_M.items():
        rows = [p for p in presets.values() if p.family == fam]
        if not rows:
            continue
        smallest = min(rows, key=lambda p: int(p.name.rsplit("_", 1)[1]))
        batch = int(smallest.name.rsplit("_", 1)[1])
        services.append(Service(model=fam,
                                request_ms=max(1.0, smallest.iter_ms / batch),
                                kernels=max(2, round(smallest.kernels / 3)),
                                mem=int(params * 1e6 * 4) + INFER_WORKSPACE))
    return services
