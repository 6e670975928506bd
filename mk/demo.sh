#!/bin/sh
# make demo: three jobs share one simulated GPU under Salus, then the same
# jobs run without it; a short table compares what happened.
#
#   sh mk/demo.sh            (what make demo runs, from the repository root)
#
# The jobs (workloads/README.md) run over simgpu (build/sim/libcuda.so.1,
# sim/README.md), whose kernels of all processes take turns on one simulated
# engine: without Salus that is the GPU's own time slicing, with a 100 us
# context switch whenever consecutive kernels belong to different processes.
# With Salus they are started by `salus run` and watched with salus-top.
# Each run has its own simgpu state and table, removed at the end.  What the
# table shows comes from the jobs' result lines, simgpu's kernel trace and
# libsalus's reports, read by tools/demo.awk.  Plain sh and awk.
set -eu

B=${B:-build}
salus=$B/bin/salus
top=$B/bin/salus-top
train=$B/bin/salus-train
infer=$B/bin/salus-infer
for f in "$salus" "$top" "$train" "$infer" "$B/sim/libcuda.so.1" "$B/libsalus.so"; do
    if [ ! -e "$f" ]; then
        echo "demo: $f is not built: run make first" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/salus-demo.XXXXXX")
id=salus-demo-$$
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
    rm -f "/dev/shm/$id-salus" "/dev/shm/$id-none" "/dev/shm/$id-table"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The jobs see only the demo's settings, not the caller's SALUS_* or preload.
for v in $(env | sed -n 's/^\(SALUS_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD SIMGPU_TRACE
LD_LIBRARY_PATH=$B/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SIMGPU_MEMORY=16G
export LD_LIBRARY_PATH SIMGPU_MEMORY

# The jobs: GPU time per iteration or request in salus_spin kernels.
LONG="--iterations 100 --kernels 20 --aux-kernels 0 --kernel-us 2000 --host-ms 2 --mem 2G --iter-mem 256M"
SHORT="--iterations 30 --kernels 10 --aux-kernels 0 --kernel-us 2000 --mem 1G"
SERVE="--rate 20 --kernels 2 --aux-kernels 0 --kernel-us 1000 --seconds 5 --mem 512M"
SHORT_AT_MS=1000

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
sleep_until() {   # <ms since t0>
    left=$(( $1 - ($(now_ms) - t0) ))
    if [ "$left" -gt 0 ]; then sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"; fi
}

# launch <mode> <name> <priority> <mem limit> <program> <options...>
launch() {
    mode=$1 name=$2 prio=$3 limit=$4; shift 4
    if [ "$mode" = salus ]; then
        "$salus" run --name "$name" --priority "$prio" --mem "$limit" -- "$@" --name "$name" \
            >"$tmp/$mode.$name" 2>"$tmp/$mode.$name.err" &
    else
        "$@" --name "$name" >"$tmp/$mode.$name" 2>"$tmp/$mode.$name.err" &
    fi
    pids="$pids $!"
}

# salus-top --once samples twice, half a second apart, and shows the table
# as the second sample saw it: start it half a second before the moment.
snapshot() {   # <ms since t0> <what is going on>
    sleep_until $(( $1 - 500 ))
    view=$("$top" --once -t "/$id-table")
    printf '\n-- salus-top --once at %.1f s: %s\n' "$(( $(now_ms) - t0 ))e-3" "$2"
    printf '%s\n' "$view" | sed 's/^./   &/'
}

run() {   # <mode: salus|none>
    mode=$1
    SIMGPU_STATE=/$id-$mode
    SIMGPU_TRACE=$tmp/$mode.trace
    SALUS_TABLE=/$id-table
    SALUS_REPORT=$tmp/$mode.report
    export SIMGPU_STATE SIMGPU_TRACE SALUS_TABLE SALUS_REPORT
    pids=""
    t0=$(now_ms)
    launch "$mode" long 10 3G "$train" $LONG
    launch "$mode" serve 50 2G "$infer" $SERVE
    if [ "$mode" = salus ]; then
        snapshot 700 "long and serve share the GPU"
    fi
    sleep_until $SHORT_AT_MS
    launch "$mode" short 90 2G "$train" $SHORT
    if [ "$mode" = salus ]; then
        snapshot 1500 "short (priority 90) has arrived"
        snapshot 3500 "short is done"
    fi
    for p in $pids; do
        if ! wait "$p"; then
            echo "demo: a job failed:" >&2
            tail -n 5 "$tmp"/$mode.* >&2
            exit 1
        fi
    done
    pids=""
    echo $(( $(now_ms) - t0 )) >"$tmp/$mode.wall"
    # The kernels (not copies or memsets) as "start end pid", in order of start.
    sed -n '/"kind":"kernel"/s/.*"pid":\([0-9]*\).*"start_ns":\([0-9]*\),"end_ns":\([0-9]*\).*/\2 \3 \1/p' \
        "$SIMGPU_TRACE" | sort -n >"$tmp/$mode.kernels"
}

cat <<EOF
Salus demo: three jobs share one simulated GPU (simgpu: one engine, 16 GiB).
  long   training, priority 10, 100 iterations of 40 ms of GPU time, from 0 s
  serve  inference, priority 50, 20 requests/s of 2 ms of GPU time, for 5 s
  short  training, priority 90, 30 iterations of 20 ms of GPU time, from 1 s
Under Salus with its default policy, fair: GPU time in proportion to priority + 1,
the GPU handed over at iteration boundaries.  Started with, for instance:
  salus run --name long --priority 10 --mem 3G -- salus-train ...
EOF
run salus
printf '\n-- the same jobs without Salus (the GPU time-slices between them) ...\n'
run none

echo
for mode in salus none; do
    for job in long short serve; do
        printf '%s %s ' "$mode" "$job"; tail -n 1 "$tmp/$mode.$job"
    done
    [ -f "$tmp/$mode.report" ] && sed "s/^/$mode report /" "$tmp/$mode.report"
    printf '%s wall %s\n' "$mode" "$(cat "$tmp/$mode.wall")"
done | awk -v salus_k="$tmp/salus.kernels" -v none_k="$tmp/none.kernels" \
    -v short_at="$SHORT_AT_MS" -f tools/demo.awk
