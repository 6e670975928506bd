# demo.awk - the closing table of make demo (mk/demo.sh): what three jobs got
# of one simulated GPU with Salus and without it, and two lines on what the
# numbers show.
#
# Input, one record a line: "<mode> <job> <result JSON>" (the job's result
# line), "<mode> report <JSON>" (a libsalus report), "<mode> wall <ms>";
# mode is salus or none.  Variables: salus_k and none_k, files of the
# kernels of each run as "start_ns end_ns pid" in order of start (simgpu's
# trace); short_at, when the short job was started (ms).  POSIX awk.

function val(line, key,    m) {
    if (match(line, "\"" key "\":(\"[^\"]*\"|[-0-9.e+]+)")) {
        m = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
        gsub(/"/, "", m)
        return m
    }
    return ""
}

function human(b) {
    if (b == "") return "-"
    if (b >= 1073741824) return sprintf("%.1fG", b / 1073741824)
    if (b >= 1048576) return sprintf("%.0fM", b / 1048576)
    return sprintf("%.0fK", b / 1024)
}

# Read a run's kernels: GPU time of each pid while the short job ran, the
# context switches (consecutive kernels of different processes) and the
# switches to each pid, and the busy time.
function kernels(m, file,    line, f, prev, ws, we, s, e, o) {
    ws = start[m, "short"]; we = end[m, "short"]
    prev = ""
    while ((getline line < file) > 0) {
        split(line, f, " ")
        s = f[1] + 0; e = f[2] + 0
        busy[m] += e - s
        pbusy[m, f[3]] += e - s
        o = (e < we ? e : we) - (s > ws ? s : ws)
        if (o > 0) inwin[m, f[3]] += o
        if (prev != "" && f[3] != prev) { ctx[m]++; to[m, f[3]]++ }
        prev = f[3]
    }
    close(file)
}

$2 == "wall" { wall[$1] = $3; next }
$2 == "report" {
    p = val($0, "pid")
    held[$1, p] = val($0, "gpu_held_ms")
    peak[$1, p] = val($0, "mem_peak_bytes")
    limit[$1, p] = val($0, "mem_limit_bytes")
    next
}
{
    m = $1; j = $2
    pid[m, j] = val($0, "pid")
    jct[m, j] = val($0, "jct_s")
    start[m, j] = val($0, "start_ns") + 0
    end[m, j] = val($0, "end_ns") + 0
    if (j == "serve") { p50[m] = val($0, "latency_ms_p50"); p99[m] = val($0, "latency_ms_p99") }
    if (!(m in first) || start[m, j] < first[m]) first[m] = start[m, j]
    if (end[m, j] > last[m]) last[m] = end[m, j]
}

END {
    kernels("salus", salus_k); kernels("none", none_k)
    n = split("long short serve", job, " ")
    split("10 90 50", prio, " ")
    win["salus"] = (end["salus", "short"] - start["salus", "short"])
    win["none"] = (end["none", "short"] - start["none", "short"])

    fmt = "%-6s %4s  %6s %6s %7s %7s %15s   %6s %6s %7s\n"
    printf "%13s%s   %s\n", "", "---------------- with Salus -----------------",
        "--- without Salus ---"
    printf fmt, "job", "prio", "JCT s", "GPU%*", "ctx sw", "held s", "mem peak/limit",
        "JCT s", "GPU%*", "ctx sw"
    for (i = 1; i <= n; i++) {
        j = job[i]; ps = pid["salus", j]; pn = pid["none", j]
        mem = human(peak["salus", ps])
        if (limit["salus", ps] != "" && limit["salus", ps] > 0) mem = mem "/" human(limit["salus", ps])
        printf fmt, j, prio[i], sprintf("%.2f", jct["salus", j]),
            sprintf("%.0f%%", win["salus"] ? 100 * inwin["salus", ps] / win["salus"] : 0),
            to["salus", ps] + 0,
            held["salus", ps] == "" ? "-" : sprintf("%.2f", held["salus", ps] / 1000), mem,
            sprintf("%.2f", jct["none", j]),
            sprintf("%.0f%%", win["none"] ? 100 * inwin["none", pn] / win["none"] : 0),
            to["none", pn] + 0
    }
    for (k = 1; k <= 2; k++) {
        m = k == 1 ? "salus" : "none"
        span[m] = (last[m] - first[m]) / 1e9
        util[m] = span[m] > 0 ? 100 * busy[m] / 1e9 / span[m] : 0
    }
    printf "\n"
    printf "%-24s %-40s %s\n", "serve latency p50/p99",
        sprintf("%.1f / %.1f ms", p50["salus"], p99["salus"]),
        sprintf("%.1f / %.1f ms", p50["none"], p99["none"])
    printf "%-24s %-40s %s\n", "GPU busy",
        sprintf("%.0f%% of %.1f s", util["salus"], span["salus"]),
        sprintf("%.0f%% of %.1f s", util["none"], span["none"])
    printf "%-24s %-40s %s\n", "context switches",
        sprintf("%d (100 us each)", ctx["salus"]), sprintf("%d (100 us each)", ctx["none"])
    print "* GPU%: share of the GPU's time while short ran; ctx sw: times the GPU switched to the"
    print "  job from another process; held s: time the job held Salus's lease."
    print ""

    # What the numbers show, in words that follow them.
    ss = jct["salus", "short"]; sn = jct["none", "short"]
    ls = jct["salus", "long"]; ln = jct["none", "long"]
    t = sprintf("With Salus the high-priority job got %.0f%% of the GPU while it ran (%.0f%% without) " \
        "and finished in %.2f s instead of %.2f s, with %d context switches instead of %d.",
        win["salus"] ? 100 * inwin["salus", pid["salus", "short"]] / win["salus"] : 0,
        win["none"] ? 100 * inwin["none", pid["none", "short"]] / win["none"] : 0,
        ss, sn, ctx["salus"], ctx["none"])
    if (ls > ln * 1.05)
        t = t sprintf(" The low-priority job gave way: %.2f s instead of %.2f s.", ls, ln)
    else
        t = t sprintf(" The low-priority job lost nothing: %.2f s instead of %.2f s.", ls, ln)
    ps = pid["salus", "serve"]
    if (util["salus"] < util["none"] - 5 && held["salus", ps] != "" &&
        held["salus", ps] / 1000 > 2 * pbusy["salus", ps] / 1e9)
        t = t sprintf(" The GPU was busy %.0f%% of the time instead of %.0f%%: the service held " \
            "the lease %.2f s for %.2f s of kernels, and the GPU idled while it awaited requests.",
            util["salus"], util["none"], held["salus", ps] / 1000, pbusy["salus", ps] / 1e9)
    wrap(t, 92)
}

# Print text in lines of at most width characters, broken between words.
function wrap(text, width,    n, w, i, line) {
    n = split(text, w, " ")
    line = ""
    for (i = 1; i <= n; i++) {
        if (line != "" && length(line) + 1 + length(w[i]) > width) {
            print line
            line = w[i]
        } else {
            line = line (line == "" ? "" : " ") w[i]
        }
    }
    if (line != "") print line
}
