#!/bin/sh
# Run every test program, TEST_JOBS at a time (default 2), and sum cmocka's
# results.
#
#   mk/run-tests.sh <log-dir> <timeout-seconds> <test-binary>...
#
# Each binary is a cmocka group.  Its output goes to <log-dir>/<name>.log and
# is shown when anything in it fails.  A binary that crashes, hangs past the
# timeout or exits non-zero without a cmocka failure counts as one failure
# more, so nothing is lost from the summary.  The last line is
#   N passed, N failed, N skipped
# and the exit status is 0 only when nothing failed.
#
# With CMOCKA_TEST_FILTER set (make test F=...), each binary runs only its
# tests whose names match; binaries with none are left out of the listing,
# and a filter that matches no test at all is a failure (a typo must not pass).
#
# Divided into: running one binary (its counts into <log-dir>/<name>.res);
# the lanes; the report, in the order given.
#
# TEST_JOBS=2 runs two binaries at once: lanes, each taking the next binary
# nobody has taken (a directory made per binary: mkdir is atomic), so that
# a long binary holds one lane while the other goes through the short ones.
# The tests never share state: each names its simgpu states and tables
# (tu_unique_name, pid-based) and its files (tu_tmpdir, mkdtemp); each
# binary also gets a SIMGPU_STATE and SALUS_TABLE of its own here, so that
# a process that does not set them does not meet another binary's, or
# another checkout's, on the per-user defaults.  Of the binaries named in
# TEST_HEAVY (tests/module.mk: those that keep a core busy, Python and
# shell mostly) one runs at a time: a lane whose next one is heavy while
# another heavy runs takes a light one meanwhile (a heavy one holds the
# directory "heavy" while it runs).  The binaries named in TEST_ALONE
# (those whose checks are shares of time, or that move the most memory)
# run after the lanes, one at a time, so that no binary of this run
# competes with them.  The report waits for each
# binary's result in turn; every binary has its timeout, so the wait ends.
set -u
filter=${CMOCKA_TEST_FILTER:-}
jobs=${TEST_JOBS:-2}
case "$jobs" in ''|*[!0-9]*|0) echo "run-tests: TEST_JOBS=$jobs is not a count of 1 or more" >&2; exit 2;; esac

logdir=$1; limit=$2; shift 2
mkdir -p "$logdir"
claims="$logdir/.claims.$$"
rm -rf "$claims"
mkdir -p "$claims"
trap 'rm -rf "$claims"' EXIT

# ---- one binary -------------------------------------------------------------

run_one() {
    t=$1
    name=$(basename "$t")
    log="$logdir/$name.log"
    start=$(date +%s)
    SIMGPU_STATE="/salus-rt-$$-$name-sim" SALUS_TABLE="/salus-rt-$$-$name" \
        timeout -k 5 "$limit" "$t" >"$log" 2>&1
    rc=$?
    rm -f "/dev/shm/salus-rt-$$-$name-sim" "/dev/shm/salus-rt-$$-$name"
    secs=$(( $(date +%s) - start ))
    # Count the run section only: cmocka repeats names in its summary.
    counts=$(awk '
        /^\[==========\] .* run\./ { done = 1 }
        done { next }
        /^\[ RUN      \]/ { run++ }
        /^\[       OK \]/ { ok++ }
        /^\[  FAILED  \]/ { bad++ }
        /^\[  SKIPPED \]/ { skip++ }
        /^\[  ERROR   \]/ { err++ }
        END { printf "%d %d %d %d %d\n", run, ok, bad, skip, err }' "$log")
    echo "$rc $secs $counts" > "$logdir/$name.res.tmp"
    mv "$logdir/$name.res.tmp" "$logdir/$name.res"
}

# ---- the lanes ----------------------------------------------------------------

alone() {
    case " ${TEST_ALONE:-} " in *" $(basename "$1") "*) return 0 ;; esac
    return 1
}

heavy() {
    case " ${TEST_HEAVY:-} " in *" $(basename "$1") "*) return 0 ;; esac
    return 1
}

# Passes over the list until every binary of the lanes is taken: a light
# one is taken when nobody has; a heavy one when nobody has and no other
# heavy one runs.  A pass that took nothing while some are left (heavy
# ones, waiting for the one that runs) waits a second for it.
lane() {
    left=1
    while [ "$left" -gt 0 ]; do
        i=0; left=0; took=0
        for t in "$@"; do
            i=$(( i + 1 ))
            alone "$t" && continue
            [ -d "$claims/$i" ] && continue
            if heavy "$t"; then
                if ! mkdir "$claims/heavy" 2>/dev/null; then
                    left=$(( left + 1 ))
                    continue
                fi
                if mkdir "$claims/$i" 2>/dev/null; then
                    run_one "$t"
                    took=1
                fi
                rmdir "$claims/heavy"
            elif mkdir "$claims/$i" 2>/dev/null; then
                run_one "$t"
                took=1
            fi
        done
        [ "$left" -gt 0 ] && [ "$took" -eq 0 ] && sleep 1
    done
}

for t in "$@"; do rm -f "$logdir/$(basename "$t").res"; done
(
    n=0
    while [ "$n" -lt "$jobs" ]; do
        lane "$@" &
        n=$(( n + 1 ))
    done
    wait
    for t in "$@"; do
        alone "$t" && run_one "$t"
    done
) &

# ---- the report -----------------------------------------------------------------

passed=0; failed=0; skipped=0; failing=""; ran=0
for t in "$@"; do
    name=$(basename "$t")
    log="$logdir/$name.log"
    while [ ! -e "$logdir/$name.res" ]; do sleep 1; done
    set -- $(cat "$logdir/$name.res")
    rc=$1; secs=$2; run=$3; ok=$4; bad=$5; skip=$6; err=$7
    rm -f "$logdir/$name.res"
    unfinished=$(( run - ok - bad - skip ))
    extra=0
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then extra=1; fi
    [ "$unfinished" -gt 0 ] && bad=$(( bad + unfinished ))
    [ "$err" -gt 0 ] && [ "$run" -eq 0 ] && extra=1
    bad=$(( bad + extra ))
    ran=$(( ran + run ))
    [ -n "$filter" ] && [ "$run" -eq 0 ] && [ "$bad" -eq 0 ] && continue
    passed=$(( passed + ok )); failed=$(( failed + bad )); skipped=$(( skipped + skip ))
    status="ok"
    [ "$bad" -gt 0 ] && status="FAILED"
    why=""
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why=" (timed out after ${limit}s)"
    [ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && why=" (killed by signal $(( rc - 128 )))"
    printf '%-28s %3d passed %3d failed %3d skipped %4ss  %s%s\n' \
        "$name" "$ok" "$bad" "$skip" "$secs" "$status" "$why"
    if [ "$bad" -gt 0 ]; then
        failing="$failing $name"
        sed -n '1,400p' "$log" | grep -v '^\[       OK \]\|^\[ RUN      \]' | sed 's/^/    | /' | tail -n 60
    fi
    if [ "$skip" -gt 0 ]; then
        grep '^\[  SKIPPED \]\|^\[  REASON  \]' "$log" | sed -n '1,40p' | sed 's/^/    skipped: /'
    fi
done
wait

if [ -n "$filter" ] && [ "$ran" -eq 0 ]; then
    echo "no test matches the filter '$filter'"
    failed=$(( failed + 1 ))
fi
# Each failing binary's failures again, just above the summary: a CI log is
# often read from its tail, where the rows above are out of sight.
for name in $failing; do
    grep -h '^ERROR: \|^\[  ERROR   \]\|^\[   LINE   \]\|^\[  FAILED  \]' "$logdir/$name.log" |
        grep -v '^\[  FAILED  \] [0-9]* test' | awk '!seen[$0]++' | sed -n '1,12p' | cut -c1-400 |
        sed "s/^/    $name: /"
done
[ -n "$failing" ] && echo "failing:$failing (logs in $logdir)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
