"""NVML inside a PyTorch job: pynvml, torch.cuda.list_gpu_processes() and
torch.cuda.mem_get_info() tell one story, the job's own share.

  nvml_view: under SALUS_MEM_LIMIT, NVML's total is the limit, its free is
  the driver's free as PyTorch reads it (mem_get_info), its used the rest;
  the job's row in NVML's process list carries that used memory.
  list_gpu_processes: PyTorch's own NVML listing names the job.
  nvml_control: the same job without libsalus sees the whole device.
"""
import os
import re

import fwlib
from fwlib import MIB, check

LIMIT = 512 * MIB
DEVICE = 16 << 30
_runs = {}


def job(args):
    import pynvml
    import torch
    held = torch.empty(128 * MIB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    rows = [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    listing = torch.cuda.list_gpu_processes(0)
    pynvml.nvmlShutdown()
    del held
    fwlib.did(free=free, total=total, nvml_total=m.total, nvml_free=m.free, nvml_used=m.used,
              rows=rows, listing=listing, pid=os.getpid())


def the_run(salus):
    """The one job with libsalus (salus=True) or without, run once."""
    if salus not in _runs:
        run = fwlib.Run("nvml-%s" % ("salus" if salus else "plain"), memory="16G", salus=salus)
        try:
            env = {"SALUS_MEM_LIMIT": "%dM" % (LIMIT >> 20)} if salus else {}
            j = run.start("torch", [], env)
            j.expect_ok(300)
            _runs[salus] = j.did()
        except (fwlib.Skip, fwlib.Fail) as e:
            _runs[salus] = e
        finally:
            run.close()
    if isinstance(_runs[salus], Exception):
        raise _runs[salus]
    return _runs[salus]


def case_view():
    d = the_run(True)
    check(d["total"] == LIMIT, "mem_get_info's total is %d, the limit %d", d["total"], LIMIT)
    check(d["nvml_total"] == LIMIT, "NVML's total is %d, the limit %d", d["nvml_total"], LIMIT)
    check(d["nvml_free"] == d["free"], "NVML's free is %d, mem_get_info's %d",
          d["nvml_free"], d["free"])
    check(d["nvml_used"] == LIMIT - d["free"], "NVML's used is %d, the limit less free %d",
          d["nvml_used"], LIMIT - d["free"])
    check(d["nvml_used"] >= 128 * MIB, "NVML's used %d is less than the job's tensor",
          d["nvml_used"])
    mine = [used for pid, used in d["rows"] if pid == d["pid"]]
    check(len(mine) == 1, "NVML's process list %r has no single row for the job %d",
          d["rows"], d["pid"])
    check(mine[0] == d["nvml_used"], "the job's row says %d used, NVML's memory info %d",
          mine[0], d["nvml_used"])


def case_listing():
    d = the_run(True)
    m = re.search(r"process\s+%d\s+uses\s+([0-9.]+) MB" % d["pid"], d["listing"])
    check(m, "torch.cuda.list_gpu_processes() does not name the job %d: %r", d["pid"],
          d["listing"])
    check(abs(float(m.group(1)) * MIB - d["nvml_used"]) < MIB / 100,
          "torch.cuda.list_gpu_processes() says %s MB, NVML's used is %d bytes", m.group(1),
          d["nvml_used"])


def case_control():
    d = the_run(False)
    check(d["nvml_total"] == DEVICE, "without libsalus NVML's total is %d, the device's %d",
          d["nvml_total"], DEVICE)
    check(d["total"] == DEVICE, "without libsalus mem_get_info's total is %d", d["total"])


if __name__ == "__main__":
    fwlib.main(job, [("torch_nvml_view", case_view),
                     ("torch_nvml_list_gpu_processes", case_listing),
                     ("torch_nvml_control", case_control)])
