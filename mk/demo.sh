#!/bin/sh
# Two training jobs share one simulated GPU; print what each got.
#
#   sh mk/demo.sh            (what make demo runs, from the repository root)
#
# Both jobs run at once over simgpu (build/sim/libcuda.so.1) with a state and
# an arbitration table of their own, under libsalus (build/libsalus.so) when
# it is built.  simgpu's kernel trace gives each job's GPU time; the jobs'
# result lines give JCT, iteration time and throughput.  Plain sh and awk.
set -eu

B=${B:-build}
train=$B/bin/salus-train
sim=$B/sim/libcuda.so.1

if [ ! -x "$train" ]; then
    echo "demo: $train is not built: run make first" >&2
    exit 1
fi
if [ ! -e "$sim" ]; then
    echo "demo: simgpu ($sim) is not built: run make first" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/salus-demo.XXXXXX")
state=salus-demo-$$
cleanup() {
    rm -rf "$tmp"
    rm -f "/dev/shm/$state" "/dev/shm/$state-table"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LD_LIBRARY_PATH=$B/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SIMGPU_STATE=/$state
SIMGPU_TRACE=$tmp/trace.jsonl
SIMGPU_MEMORY=${SIMGPU_MEMORY:-16G}
SALUS_TABLE=/$state-table
export LD_LIBRARY_PATH SIMGPU_STATE SIMGPU_TRACE SIMGPU_MEMORY SALUS_TABLE
# Only the jobs get the interposer, not the shell tools around them.
preload=""
under="directly on simgpu (libsalus.so is not built)"
if [ -e "$B/libsalus.so" ]; then
    preload=$(cd "$B" && pwd)/libsalus.so
    under="under libsalus ($B/libsalus.so)"
fi

echo "Two training jobs share one simulated GPU, $under."
echo "  job-a: 60 iterations of 20 ms GPU time (20 kernels) + 2 ms host time; 512M, +128M per iteration"
echo "  job-b: 120 iterations of 5 ms GPU time (10 kernels), no host time; 256M"
echo

env ${preload:+LD_PRELOAD=$preload} "$train" --preset demo --name job-a \
    >"$tmp/a.json" 2>"$tmp/a.err" &
pid_a=$!
env ${preload:+LD_PRELOAD=$preload} "$train" --iterations 120 --kernels 10 --aux-kernels 0 --kernel-us 500 --mem 256M \
    --name job-b >"$tmp/b.json" 2>"$tmp/b.err" &
pid_b=$!
rc=0
wait "$pid_a" || rc=$?
wait "$pid_b" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "demo: a job failed (exit $rc):" >&2
    cat "$tmp/a.json" "$tmp/a.err" "$tmp/b.json" "$tmp/b.err" >&2
    exit 1
fi

# The jobs' result lines on stdin; the trace read at the end.
cat "$tmp/a.json" "$tmp/b.json" | awk -v trace="$SIMGPU_TRACE" '
function val(line, key,    m) {
    if (match(line, "\"" key "\":(\"[^\"]*\"|[-0-9.e+]+)")) {
        m = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
        gsub(/"/, "", m)
        return m
    }
    return ""
}
/"program"/ {
    n++
    pid[n] = val($0, "pid"); name[n] = val($0, "name")
    iters[n] = val($0, "iterations"); jct[n] = val($0, "jct_s")
    p50[n] = val($0, "iter_ms_p50"); p99[n] = val($0, "iter_ms_p99")
    tput[n] = val($0, "throughput_it_s"); gpu[n] = val($0, "gpu_ms_per_iter")
    s = val($0, "start_ns") + 0; e = val($0, "end_ns") + 0
    if (!first || s < first) first = s
    if (e > last) last = e
}
END {
    while ((getline line < trace) > 0) {
        p = val(line, "pid"); d = val(line, "end_ns") - val(line, "start_ns")
        busy[p] += d; total += d
    }
    span = (last - first) / 1e9
    printf "%-6s %7s %6s %7s %15s %9s %10s %7s %9s\n", "job", "pid", "iters", "JCT s",
        "iter ms p50/p99", "iter/s", "GPU ms/it", "GPU s", "GPU share"
    for (i = 1; i <= n; i++)
        printf "%-6s %7d %6d %7.2f %7.1f/%-7.1f %9.1f %10.1f %7.2f %8.0f%%\n", name[i], pid[i],
            iters[i], jct[i], p50[i], p99[i], tput[i], gpu[i], busy[pid[i]] / 1e9,
            total ? 100 * busy[pid[i]] / total : 0
    printf "\nGPU busy %.2f s of the %.2f s both jobs took together (%.0f%% utilization).\n",
        total / 1e9, span, span ? 100 * total / 1e9 / span : 0
}'
