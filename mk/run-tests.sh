#!/bin/sh
# Run every test program, one at a time, and sum cmocka's results.
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
set -u
filter=${CMOCKA_TEST_FILTER:-}

logdir=$1; limit=$2; shift 2
mkdir -p "$logdir"
passed=0; failed=0; skipped=0; failing=""; ran=0

for t in "$@"; do
    name=$(basename "$t")
    log="$logdir/$name.log"
    start=$(date +%s)
    timeout -k 5 "$limit" "$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    # Count the run section only: cmocka repeats names in its summary.
    set -- $(awk '
        /^\[==========\] .* run\./ { done = 1 }
        done { next }
        /^\[ RUN      \]/ { run++ }
        /^\[       OK \]/ { ok++ }
        /^\[  FAILED  \]/ { bad++ }
        /^\[  SKIPPED \]/ { skip++ }
        /^\[  ERROR   \]/ { err++ }
        END { printf "%d %d %d %d %d\n", run, ok, bad, skip, err }' "$log")
    run=$1; ok=$2; bad=$3; skip=$4; err=$5
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
        grep '^\[  SKIPPED \]' "$log" | sed -n '1,20p' | sed 's/^/    skipped: /'
    fi
done

if [ -n "$filter" ] && [ "$ran" -eq 0 ]; then
    echo "no test matches the filter '$filter'"
    failed=$(( failed + 1 ))
fi
[ -n "$failing" ] && echo "failing:$failing (logs in $logdir)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
