"""Microbenchmarks: gathered, not run here.

The scheduler's and the memory module's own benchmarks (bench/sched.mk,
bench/memory.mk, run by `make bench` before the report) write
micro_sched.json, micro_memory.json and micro_memory_swap.json under the
results directory.  This step reads them and writes micro.json with the
three figures the summary carries: ns added per launch on the fast path, ns
per alloc/free pair, and handoff latency p50/p99 in us; and, for the report,
the worst pair over the sizes with paging off and on, ns added per host sync
alone and beside 256 idle threads, and what a fresh process's start-up costs
(micro_startup.json, bench/startup.mk), and paging's GiB/s out and in over
simgpu beside its floor (micro_paging.json, bench/memory.mk).  A figure whose file is missing is
null, and the report says so.
"""
import json
import os

from . import config

FILES = {"sched": "micro_sched.json", "memory": "micro_memory.json",
         "memory_swap": "micro_memory_swap.json", "startup": "micro_startup.json",
         "paging": "micro_paging.json"}

# Where each figure may be, first match wins: key paths tried in order.
WANTED = {
    "overhead_ns_per_launch": ("sched", [["overhead_ns_per_launch"],
                                         ["launch", "overhead_ns_per_launch"],
                                         ["launch_overhead", "overhead_ns_per_launch"]]),
    "alloc_ns_per_pair": ("memory", [["alloc_ns_per_pair"], ["overhead_ns_per_pair"],
                                     ["ns_per_pair"], ["salus", "ns_per_pair"]]),
    "handoff_us_p50": ("sched", [["handoff_us", "p50"], ["handoff_us_p50"],
                                 ["handoff", "p50_us"], ["handoff", "us_p50"]]),
    "handoff_us_p99": ("sched", [["handoff_us", "p99"], ["handoff_us_p99"],
                                 ["handoff", "p99_us"], ["handoff", "us_p99"]]),
    "overhead_ns_per_launch_contended": ("sched", [["overhead_ns_per_launch_contended"],
                                                   ["launch", "overhead_ns_per_launch_contended"]]),
    "overhead_ns_per_launch_two_devices": ("sched", [["overhead_ns_per_launch_two_devices"],
                                                     ["launch",
                                                      "overhead_ns_per_launch_two_devices"]]),
    "alloc_ns_per_pair_any_size": ("memory", [["alloc_ns_per_pair_any_size"]]),
    "alloc_ns_per_pair_paging": ("memory_swap", [["alloc_ns_per_pair_any_size"]]),
    "overhead_ns_per_sync": ("sched", [["overhead_ns_per_sync"]]),
    "overhead_ns_per_sync_idle_threads": ("sched", [["overhead_ns_per_sync_idle_threads"]]),
    "overhead_us_startup_first_call": ("startup", [["overhead_us_first_call"]]),
    "plain_us_startup_first_call": ("startup", [["plain_us_first_call"]]),
    "overhead_us_startup_process": ("startup", [["overhead_us_process"]]),
    "plain_us_startup_process": ("startup", [["plain_us_process"]]),
    "paging_out_gibps": ("paging", [["out_gibps"]]),
    "paging_in_gibps": ("paging", [["in_gibps"]]),
    "paging_first_out_gibps": ("paging", [["first_out_gibps"]]),
    "paging_floor_gibps": ("paging", [["floor_gibps"]]),
    "paging_memcpy_gibps": ("paging", [["memcpy_gibps"]]),
    "paging_pcie_gibps": ("paging", [["pcie_gibps"]]),
}


def _get(d, path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def _find(d, key):
    """Depth-first search for a numeric `key` anywhere in d."""
    if isinstance(d, dict):
        v = d.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        for x in d.values():
            v = _find(x, key)
            if v is not None:
                return v
    elif isinstance(d, list):
        for x in d:
            v = _find(x, key)
            if v is not None:
                return v
    return None


def load(out_dir):
    raw = {}
    for name, fn in FILES.items():
        raw[name] = config.load_json(out_dir, fn)
    figures = {}
    for fig, (src, paths) in WANTED.items():
        v = None
        if raw[src] is not None:
            for p in paths:
                v = _get(raw[src], p)
                if v is not None:
                    break
            if v is None:
                v = _find(raw[src], paths[0][-1] if len(paths[0]) == 1 else fig)
        figures[fig] = v
    return figures, raw


def run(scale, out_dir):
    figures, raw = load(out_dir)
    out = {"scale": scale.name, "figures": figures,
           "sources": {k: (FILES[k] if raw[k] is not None else None) for k in FILES},
           "raw": raw}
    with open(os.path.join(out_dir, "micro.json"), "w") as f:
        json.dump(out, f, indent=1)
    missing = [k for k, v in figures.items() if v is None]
    print("bench: micro: " + (f"missing {', '.join(missing)}" if missing else "all figures found"),
          flush=True)
    return out
