#!/usr/bin/env python3
"""Draw the panels of the Grafana dashboard (salus.json, beside this file)
from a recording of salus-top --json, so that the README shows what the
dashboard shows, from real data, without a Grafana server.

    render.py RECORDING.jsonl OUT.png

RECORDING is what `salus-top --json -d 1` printed, one snapshot a line
(record.sh makes one).  Each panel's title comes from the dashboard, and
its figure is the one its query computes: a rate of a counter is the
growth between two snapshots over the time between them.  The panel that
joins DCGM exporter's series is left out (no DCGM without a GPU).
matplotlib (Debian's python3-matplotlib) draws it.
"""
import json
import os
import sys
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
STATE_COLORS = {"running": "#2ca02c", "waiting-gpu": "#ff7f0e", "waiting-mem": "#d62728",
                "admission": "#9467bd", "idle": "#bbbbbb"}


def titles():
    with open(os.path.join(HERE, "salus.json")) as f:
        return {p["id"]: p["title"] for p in json.load(f)["panels"]}


def load(path):
    snaps = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                s = json.loads(line)
                s["t"] = datetime.strptime(s["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
                snaps.append(s)
    if len(snaps) < 2:
        sys.exit(f"render: {path}: fewer than two snapshots")
    return snaps


def series(snaps):
    """Per process (pid, name): times and figures; per snapshot: device figures."""
    t0 = snaps[0]["t"]
    procs, dev = {}, {"t": [], "waiters": [], "mem_waiters": [], "queue": [], "switches": [],
                      "budget": []}
    for s in snaps:
        t = s["t"] - t0
        d = s["devices"][0] if s["devices"] else None
        dev["t"].append(t)
        dev["waiters"].append(len(d["waiters"]) if d else 0)
        dev["mem_waiters"].append(d["mem_waiters"] if d else 0)
        dev["queue"].append(d["admission_queue"] if d else 0)
        dev["switches"].append(d["switches"] if d else None)
        dev["budget"].append(d["mem_budget_bytes"] if d else None)
        for p in (d["processes"] if d else []):
            k = (p["pid"], p["name"])
            e = procs.setdefault(k, {"t": [], "held": [], "waited": [], "mem": [], "state": []})
            e["t"].append(t)
            e["held"].append(p["gpu_held_ms"] / 1e3)
            e["waited"].append(p["waited_ms"] / 1e3)
            e["mem"].append(p["mem_used_bytes"])
            e["state"].append(p["state"])
    return procs, dev


def rate(t, v):
    """rate(): the growth of a counter over the time between samples."""
    return ([t[i] for i in range(1, len(t))],
            [max(0.0, (v[i] - v[i - 1]) / (t[i] - t[i - 1])) if t[i] > t[i - 1] else 0.0
             for i in range(1, len(t))])


def draw(snaps, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = titles()
    procs, dev = series(snaps)
    label = {k: f"{k[1]} ({k[0]})" for k in procs}
    fig = plt.figure(figsize=(13, 10.5))
    fig.patch.set_facecolor("#181b1f")
    grid = fig.add_gridspec(4, 2, height_ratios=[1, 1, 1, 0.9], hspace=0.45, wspace=0.15,
                            top=0.93, bottom=0.06, left=0.1, right=0.98)
    axes = [fig.add_subplot(grid[r, c]) for r in range(3) for c in range(2)]
    states = fig.add_subplot(grid[3, :])
    for ax in axes + [states]:
        ax.set_facecolor("#111217")
        ax.tick_params(colors="#ccccdc", labelsize=8)
        for sp in ax.spines.values():
            sp.set_color("#333")
        ax.grid(color="#2c2f36", linewidth=0.6)

    def finish(ax, pid, ylabel=None, pct=False):
        ax.set_title(title[pid], color="#ccccdc", fontsize=10, loc="left")
        if pct:
            ax.set_ylim(0, 1.02)
            ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        if ylabel:
            ax.set_ylabel(ylabel, color="#ccccdc", fontsize=8)
        ax.legend(fontsize=7, facecolor="#181b1f", labelcolor="#ccccdc", edgecolor="#333",
                  loc="upper left")

    ax = axes[0]
    grid_t = dev["t"][1:]                   # every snapshot after the first
    layers = []
    for k, e in procs.items():
        at = dict(zip(*rate(e["t"], e["held"])))
        layers.append([at.get(t, 0.0) for t in grid_t])
    if layers:
        ax.stackplot(grid_t, *layers, labels=[label[k] for k in procs], alpha=0.8)
    finish(ax, 1, pct=True)
    ax = axes[1]
    for k, e in procs.items():
        ax.plot(*rate(e["t"], e["waited"]), label=label[k], linewidth=1.2)
    finish(ax, 2, pct=True)
    ax = axes[2]
    for k, e in procs.items():
        ax.plot(e["t"], [m / 2**30 for m in e["mem"]], label=label[k], linewidth=1.2)
    ax.plot(dev["t"], [(b or 0) / 2**30 for b in dev["budget"]], label="budget",
            linestyle="--", color="#888")
    finish(ax, 3, ylabel="GiB")
    ax = axes[3]
    for key, name in (("waiters", "waiting for the GPU"), ("mem_waiters", "waiting for memory"),
                      ("queue", "waiting for admission")):
        ax.step(dev["t"], dev[key], where="post", label=name, linewidth=1.2)
    finish(ax, 4, ylabel="processes")
    ax = axes[4]
    sw = [(t, v) for t, v in zip(dev["t"], dev["switches"]) if v is not None]
    if len(sw) > 1:
        ax.plot(*rate([a for a, _ in sw], [b for _, b in sw]), label="handoffs/s", color="#5794f2")
    finish(ax, 5, ylabel="per second")
    ax = axes[5]
    ax.text(0.5, 0.5, "joins DCGM exporter's series on UUID and Hostname:\n"
            "shown where DCGM runs beside Salus (a real GPU)", ha="center", va="center",
            color="#8e8e8e", fontsize=9, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title[6], color="#ccccdc", fontsize=10, loc="left")

    names = list(procs)
    for row, k in enumerate(names):
        e = procs[k]
        for i in range(len(e["t"])):
            end = e["t"][i + 1] if i + 1 < len(e["t"]) else e["t"][i] + 1
            states.barh(row, end - e["t"][i], left=e["t"][i], height=0.7,
                        color=STATE_COLORS.get(e["state"][i], "#555"))
    states.set_yticks(range(len(names)))
    states.set_yticklabels([label[k] for k in names], fontsize=8, color="#ccccdc")
    states.set_title(title[7], color="#ccccdc", fontsize=10, loc="left")
    states.set_xlabel("seconds since the recording began", color="#ccccdc", fontsize=8)
    for st, col in STATE_COLORS.items():
        states.barh(-10, 0, color=col, label=st)
    states.set_ylim(-0.6, len(names) - 0.4)
    states.legend(fontsize=7, ncol=5, facecolor="#181b1f", labelcolor="#ccccdc",
                  edgecolor="#333", loc="upper right")
    fig.suptitle(json.load(open(os.path.join(HERE, "salus.json")))["title"] +
                 f"  (rendered from {len(snaps)} snapshots of salus-top --json)",
                 color="#ccccdc", fontsize=12, x=0.02, ha="left")
    fig.savefig(out, dpi=90, facecolor=fig.get_facecolor())


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: render.py RECORDING.jsonl OUT.png")
    draw(load(sys.argv[1]), sys.argv[2])


if __name__ == "__main__":
    main()
