#!/usr/bin/env python3
"""Judgements of bench/gpu/check.sh's sharing steps, over the files the
steps leave in OUTDIR (a separate file so that `python3 -m py_compile` and
check.sh's --simgpu run exercise them on a machine without a GPU).

  judge.py overlap OUT NAME [--trace FILE]
      the fraction of time two processes' kernels overlapped: NAME-a and
      NAME-b's stamps (overlap.c) or, with --trace, simgpu's trace, where
      a kernel is in flight from its submit_ns to its end_ns
  judge.py procaddr LOG
      libsalus's debug lines "resolve SYMBOL@VERSION flags=F -> EXPORT WHY":
      which wrapped exports the driver answered with the export itself
  judge.py table SUMMARY
      summary.txt as one Markdown table (what the closing note quotes)

Each prints one line: PASS, FAIL or SKIP, then the figures (the table
prints the table).  Exit 0 unless the files cannot be read at all.
"""
import json
import re
import struct
import sys


def merge(iv):
    """The union of intervals, as sorted disjoint (start, end) pairs."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def length(iv):
    return sum(e - s for s, e in iv)


def intersect(a, b):
    """Total length of the intersection of two merged interval lists."""
    i = j = 0
    tot = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def json_lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def stamps(out, name):
    """(pid, intervals, launches that ran, launches cut short) of one
    overlap.c process: each launch's earliest block start to latest block
    end; a launch with a block started and not ended was cut short (its
    process killed), and counts until its latest stamp."""
    meta = [d for d in json_lines(f"{out}/{name}.json") if "blocks" in d]
    if not meta:
        return None
    m = meta[0]
    blocks, launches = int(m["blocks"]), int(m["launches"])
    try:
        with open(f"{out}/{name}.stamps", "rb") as f:
            raw = f.read(launches * blocks * 16)
    except OSError:
        return None
    n = len(raw) // 8
    v = struct.unpack(f"<{n}Q", raw[:n * 8])
    iv, cut = [], 0
    for i in range(launches):
        row = v[i * blocks * 2:(i + 1) * blocks * 2]
        starts = [t for t in row[0::2] if t]
        ends = [t for t in row[1::2] if t]
        if not starts:
            continue
        if len(ends) < len(starts):
            cut += 1
        hi = max(ends + starts)
        iv.append((min(starts), hi))
    return m["pid"], iv, len(iv), cut


def trace_intervals(path, kernel="salus_stamp"):
    """pid -> [(submit_ns, end_ns)] of the trace's kernels of that name, with
    its cut lines applied (sim/README.md): work of that process (and
    context, 0 for all) submitted up to the cut and unfinished then ends at
    the cut, and such work that had not started never ran."""
    lines = json_lines(path)
    cuts = [d for d in lines if d.get("kind") == "cut"]
    by = {}
    for d in lines:
        if d.get("kind", "kernel") != "kernel" or d.get("name") != kernel:
            continue
        s, b, e = d["submit_ns"], d["start_ns"], d["end_ns"]
        for c in cuts:
            if c.get("pid") == d["pid"] and c.get("context", 0) in (0, d.get("context")) and \
                    s <= c["end_ns"] < e:
                e = c["end_ns"] if b < c["end_ns"] else None
                if e is None:
                    break
        if e is not None:
            by.setdefault(d["pid"], []).append((s, e))
    return by


def cmd_overlap(args):
    out, name = args[0], args[1]
    trace = args[3] if len(args) > 3 and args[2] == "--trace" else None
    sides = []
    for side in ("a", "b"):
        meta = [d for d in json_lines(f"{out}/{name}-{side}.json") if "pid" in d]
        sides.append(meta[0]["pid"] if meta else None)
    cut = 0
    if trace:
        by = trace_intervals(trace)
        ivs = [by.get(pid, []) for pid in sides]
        what = "in flight from submit to end: simgpu's trace"
    else:
        got = [stamps(out, f"{name}-{s}") for s in ("a", "b")]
        if None in got:
            print("FAIL no stamps (see %s-*.err)" % name)
            return
        ivs = [g[1] for g in got]
        cut = got[0][3] + got[1][3]
        what = "running: %globaltimer stamps"
    a, b = merge(ivs[0]), merge(ivs[1])
    if not a or not b:
        print("FAIL a process ran no kernel (%d and %d kernels)" % (len(ivs[0]), len(ivs[1])))
        return
    both = intersect(a, b)
    union = length(a) + length(b) - both
    frac = both / union if union else 0.0
    pack = name.startswith("overlap-pack")
    ok = pack or frac <= 0.001
    fig = "%.2f%% of %.1f ms overlapped (%d and %d kernels, %s%s)%s" % (
        100 * frac, union / 1e6, len(ivs[0]), len(ivs[1]), what,
        ", %d cut short by the kill" % cut if cut else "",
        "; pack: overlap allowed" if pack else "")
    print(("PASS " if ok else "FAIL ") + fig)
    print(json.dumps({"name": name, "fraction": frac, "overlap_ns": both, "union_ns": union,
                      "kernels": [len(ivs[0]), len(ivs[1])], "cut": cut}), file=sys.stderr)


RESOLVE = re.compile(r"resolve (\S+)@(\d+) flags=(\d+) -> (\S+) (wrapped|passed \(([^)]*)\))")
LAUNCHES = ("cuLaunch", "cuGraphLaunch")


def cmd_procaddr(args):
    """Per wrapped export the runtime asked for: wrapped (the driver's answer
    was the export our wrapper calls) or passed by the guard (it was not)."""
    wrapped, guarded = set(), set()
    try:
        text = open(args[0], errors="replace").read()
    except OSError:
        print("FAIL no log %s" % args[0])
        return
    for m in RESOLVE.finditer(text):
        export, why = m.group(4), m.group(6) or ""
        if m.group(5) == "wrapped":
            wrapped.add(export)
        elif why.startswith("the driver's answer is not"):
            guarded.add(export)
    if not wrapped and not guarded:
        print("FAIL no resolve lines with SALUS_LOG=debug (did the runtime use cuGetProcAddress?)")
        return
    bad = sorted(e for e in guarded if e.startswith(LAUNCHES))
    fig = "%d wrapped exports answered as exported, %d not (passed through)" % (
        len(wrapped), len(guarded))
    if guarded:
        fig += ": " + ", ".join(sorted(guarded)[:12]) + (" ..." if len(guarded) > 12 else "")
    if bad:
        fig += "; launches not intercepted: " + ", ".join(bad)
    print(("FAIL " if bad else "PASS ") + fig)


def cmd_table(args):
    rows = []
    try:
        lines = open(args[0]).read().splitlines()
    except OSError:
        print("(no summary)")
        return
    for line in lines:
        m = re.match(r"(PASS|FAIL|SKIP)\s+(\S+)\s*(.*)", line)
        if m:
            rows.append(m.groups())
    print("| step | result | figures |")
    print("|---|---|---|")
    for status, step, fig in rows:
        print("| %s | %s | %s |" % (step, status, fig.replace("|", "/")))


def main():
    cmds = {"overlap": cmd_overlap, "procaddr": cmd_procaddr, "table": cmd_table}
    if len(sys.argv) < 3 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    cmds[sys.argv[1]](sys.argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
