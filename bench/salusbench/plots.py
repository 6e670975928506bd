"""PNG figures of the experiments, from their *_plot.json and JSON files.

matplotlib (Debian's python3-matplotlib, Agg backend) is optional: without
it no figure is drawn and the report says so.  Returns the names written.
"""
import os

from .config import load_json

COLORS = {"fifo": "#888888", "srtf": "#1f77b4", "fair": "#2ca02c", "pack": "#9467bd",
          "none": "#d62728", "ideal_srtf": "#000000"}


def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except Exception:           # absent or broken: no figures
        return None


def _save(plt, fig, path, **layout):
    fig.tight_layout(**layout)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _save_with_legend(plt, fig, ax, path):
    """One panel: its grid and legend, then _save."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(plt, fig, path)


def jct_cdf(plt, tp, path):
    """Each curve over every job of the trace: a policy under which jobs died
    (none: out of memory) stops below 1, at the fraction that completed, so
    that its survivors-only curve cannot be read as all the jobs."""
    total = tp.get("jobs")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for pol, jcts in tp["jct"].items():
        if not jcts:
            continue
        v = sorted(jcts)
        n = total if total and total >= len(v) else len(v)
        base = pol.split(" ")[0]
        label = f"{pol} ({len(v)} of {n} done)" if len(v) < n else f"{pol} (all {n} done)"
        ax.step(v, [(i + 1) / n for i in range(len(v))], where="post", label=label,
                color=COLORS.get(base),
                linestyle="--" if pol == "ideal_srtf" else (":" if " " in pol else "-"),
                linewidth=1.0 if " " in pol else 1.5)
        if len(v) < n:
            ax.annotate(f"{pol}: {n - len(v)} of {n} died", (v[-1], len(v) / n),
                        xytext=(-4, 6), textcoords="offset points", ha="right", fontsize=7,
                        color=COLORS.get(base))
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("job completion time, s (arrival to completion; log scale)")
    ax.set_ylabel("fraction of all the trace's jobs completed")
    ax.set_title("Training trace: JCT distribution per policy")
    _save_with_legend(plt, fig, ax, path)


def utilization(plt, series, path, title):
    """One small panel per run, sharing the time axis."""
    names = [n for n, pts in series.items() if pts]
    if not names:
        return
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 1.0 + 1.1 * len(names)),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        pts = series[name]
        pol = name.rsplit("-", 1)[-1]
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], step="mid",
                        color=COLORS.get(pol, "C0"), alpha=0.7)
        mean = sum(p[1] for p in pts) / len(pts)
        ax.set_ylim(0, 1.05)
        ax.set_yticks([0, 0.5, 1])
        ax.text(0.995, 0.9, f"{name}: mean {mean:.2f}", transform=ax.transAxes, ha="right",
                va="top", fontsize=8, bbox={"facecolor": "white", "alpha": 0.7, "lw": 0})
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("time since the first arrival, s")
    fig.text(0.01, 0.5, "GPU busy fraction (kernel trace)", rotation=90, va="center", fontsize=9)
    _save(plt, fig, path, rect=(0.03, 0, 1, 1))


def timeline(plt, tl, path):
    pols = [p for p in ("srtf", "fair", "none") if p in tl and tl[p]["jobs"]]
    if not pols:
        return False
    fig, axes = plt.subplots(len(pols), 1, figsize=(8, 1.6 + 1.3 * len(pols)), squeeze=False)
    for ax, pol in zip(axes[:, 0], pols):
        jobs = tl[pol]["jobs"]
        for i, j in enumerate(jobs):
            ax.broken_barh(j["spans"], (i - 0.4, 0.8), color=f"C{i % 10}")
        ax.set_yticks(range(len(jobs)))
        ax.set_yticklabels([j["job"] for j in jobs], fontsize=7)
        ax.set_xlim(tl[pol].get("t0_s", 0), tl[pol]["t1_s"])
        ax.set_title(f"{pol}: kernels of {len(jobs)} jobs on the GPU", fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    axes[-1, 0].set_xlabel("time since the first arrival, s")
    _save(plt, fig, path)
    return True


def inference(plt, inf, path):
    sweep = inf.get("sweep") or []
    if not sweep:
        return False
    # The legend goes beside the axes (long labels), and the figure is saved
    # with everything drawn inside it: no label is clipped.
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    for key, label in (("salus", f"Salus ({inf.get('salus_policy')})"),
                       ("none", "no Salus (time slicing)")):
        pts = [(p["services"], p[key]["p99_ms_max"]) for p in sweep
               if p[key]["p99_ms_max"] is not None]
        col = COLORS["pack" if key == "salus" else "none"]
        ax.plot([q[0] for q in pts], [q[1] for q in pts], marker="o",
                label=label + ": worst service p99", color=col)
        med = [(p["services"], p[key]["p99_ms_median"]) for p in sweep
               if p[key]["p99_ms_median"] is not None]
        ax.plot([m[0] for m in med], [m[1] for m in med], marker=".", linestyle="--", color=col,
                label=label + ": median service p99")
        at = dict(pts)
        for p in sweep:
            if p[key]["failed"] and at:
                y = at.get(p["services"], max(at.values()))
                ax.annotate(f"{p[key]['failed']} not served", (p["services"], y),
                            xytext=(-4, 4), textcoords="offset points", ha="right",
                            fontsize=7, color=col)
    ax.axhline(inf["p99_bound_ms"], color="k", linestyle=":", label="p99 bound")
    if (inf.get("alone") or {}).get("p99_ms_max") is not None:
        ax.axhline(inf["alone"]["p99_ms_max"], color="#888888", linestyle="-.",
                   label="one GPU each: worst p99")
    ax.set_xlabel("inference services on one GPU")
    ax.set_ylabel("latency p99, ms")
    ax.set_yscale("log")
    ax.set_title("Inference: services sharing one GPU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def draw(out_dir):
    plt = _plt()
    if plt is None:
        return []
    done = []
    tp = load_json(out_dir, "training_plot.json")
    if tp:
        jct_cdf(plt, tp, os.path.join(out_dir, "training_jct_cdf.png"))
        utilization(plt, tp["util"], os.path.join(out_dir, "training_utilization.png"),
                    "Training trace: GPU utilization over time")
        done += ["training_jct_cdf.png", "training_utilization.png"]
        if timeline(plt, tp["timeline"], os.path.join(out_dir, "training_timeline.png")):
            done.append("training_timeline.png")
    hp = load_json(out_dir, "hyperparam_plot.json")
    if hp:
        utilization(plt, hp, os.path.join(out_dir, "hyperparam_utilization.png"),
                    "Hyper-parameter tuning: GPU utilization over time")
        done.append("hyperparam_utilization.png")
    inf = load_json(out_dir, "inference.json")
    if inf and inference(plt, inf, os.path.join(out_dir, "inference_p99.png")):
        done.append("inference_p99.png")
    return done
