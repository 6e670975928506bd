#!/usr/bin/env bash
# bench/gpu/check.sh - what simgpu cannot show, checked on a real NVIDIA GPU.
#
#   bench/gpu/check.sh [--simgpu] OUTDIR
#
# Run from anywhere on a machine with an NVIDIA GPU, its driver and the CUDA
# toolkit (PyTorch, JAX and CuPy are used when python3 has them).  Builds
# Salus with nvcc, then checks, each step printing PASS, FAIL or SKIP with
# its figures, never stopping the script:
#   1. build       make CUDA_ARCH=<the GPU's> CUDA_PTX_ARCH=compute_90 (or the
#                  GPU's, if older) with the toolkit found from cuda.h
#   2. overhead    salus-train and salus-infer with and without libsalus:
#                  iteration time, ns per launch, request latency
#   3. fair        two salus-train jobs under fair: both progress, handoffs
#      priority    the same under priority: the high one goes first
#   4. torch-fair  a PyTorch training loop in two processes under fair: both
#                  progress, and SALUS_REPORT counts launches and syncs made
#                  through the CUDA runtime (interception is real)
#      torch-oom   an allocation over SALUS_MEM_LIMIT raises
#                  torch.cuda.OutOfMemoryError and the process goes on
#      torch-account-*  libsalus's count matches memory_reserved() within 5%
#                  with expandable_segments and with cudaMallocAsync
#   5. overlap-*   issue 11: two processes of a fixed-work kernel under fair
#                  and pack in the patterns of its section 1: how much their
#                  kernels overlapped (bench/gpu/sharing.sh says each step)
#      procaddr-*  the driver's cuGetProcAddress answers against its exports
#      torch-graph, torch-retain, torch-six, torch-compile, torch-loader,
#      torch-ipc   capture beside a waiting peer, cudaMallocAsync retention,
#                  six processes taking their free memory, torch.compile's
#                  hooks, a SIGKILLed DataLoader job, a CUDA tensor shared
#                  between processes with paging on (SALUS_SWAP=on)
#   6. jax         with SALUS_MEM_LIMIT=8G JAX preallocates ~75% of 8G
#   7. client-*    the third-party clients of make test (cuda-bindings with
#                  and without the per-thread default stream, cuda-core,
#                  numba-cuda, PyCUDA, Debian's Numba 0.56), each beside a
#                  peer under fair and SALUS_MEM_LIMIT=64M: SALUS_REPORT
#                  against what the client did, the limit refusing, the view
#   8. nvml        NVML in a job under SALUS_MEM_LIMIT=1G beside a peer: its
#                  memory is cuMemGetInfo's view, its processes the table's;
#                  without libsalus the whole device
# Everything goes to OUTDIR: one log per step, the jobs' JSON, the
# SALUS_REPORTs, summary.txt, summary.json and summary.md (the results as
# one Markdown table, also printed at the end).  Exit 0 when nothing failed,
# 1 otherwise, 2 on bad arguments.  Each external command has a timeout;
# the whole run stays under 10 minutes (later steps SKIP when time is
# short).  CHECK_STEPS=build,overlap,... runs only those steps (of build
# overhead sched overlap procaddr torch torch-sharing jax clients nvml, or one of
# torch-sharing's: torch-graph, torch-retain, torch-six, torch-compile,
# torch-loader, torch-ipc).
#
# --simgpu runs steps 2, 3, 5 (overlap, procaddr), 7 and 8 over simgpu
# (build/sim) instead of a GPU: a test of this script on a machine without
# one (tests/test_gpucheck.c runs it so); its figures mean nothing.
set -u

usage() {
    echo "usage: $0 [--simgpu] OUTDIR" >&2
    exit 2
}
SIMGPU=0
case "${1:-}" in
--simgpu) SIMGPU=1; shift ;;
-h|--help) usage ;;
esac
[ $# -eq 1 ] || usage
case "$1" in -*) usage ;; esac

mkdir -p "$1" || { echo "$0: cannot create $1" >&2; exit 2; }
OUT=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
PY=${PYTHON:-python3}
START=$(date +%s)
BUDGET_S=${CHECK_BUDGET_S:-540}     # stop starting steps after this (the run < 10 min)
TAG="salus-check-$$"
: > "$OUT/summary.txt"
NPASS=0; NFAIL=0; NSKIP=0

# result STATUS NAME FIGURES: one line on stdout and in summary.txt.
result() {
    printf '%-4s %-26s %s\n' "$1" "$2" "$3" | tee -a "$OUT/summary.txt"
    case "$1" in
    PASS) NPASS=$((NPASS + 1)) ;;
    FAIL) NFAIL=$((NFAIL + 1)) ;;
    *) NSKIP=$((NSKIP + 1)) ;;
    esac
}

# out_of_time NAME: SKIP the step when the budget is spent.
out_of_time() {
    if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
        result SKIP "$1" "out of time (budget ${BUDGET_S}s)"
        return 0
    fi
    return 1
}

# tmo N: a command's timeout, N seconds or what is left of the whole run's
# 580 s (at least 5), so that the run stays under 10 minutes.
HARD_S=${CHECK_HARD_S:-580}
tmo() {
    local left=$(( HARD_S - ($(date +%s) - START) ))
    [ "$left" -lt 5 ] && left=5
    [ "$1" -lt "$left" ] && left=$1
    echo "$left"
}

# py CODE ARGS...: a small computation over the steps' JSON files.
py() {
    local code=$1
    shift
    "$PY" -c "$code" "$@" 2>>"$OUT/py.log"
}

# The JSON result line of a job's output file: key, or "" (jget FILE KEY).
jget() {
    py 'import json,sys
try:
    line=[l for l in open(sys.argv[1]) if l.startswith("{")][-1]
    v=json.loads(line).get(sys.argv[2])
    print("" if v is None else v)
except Exception:
    print("")' "$1" "$2"
}

cleanup() {
    rm -f /dev/shm/"$TAG"* 2>/dev/null
}
trap cleanup EXIT

# ---- environment -------------------------------------------------------------

# The CUDA toolkit: the directory whose include/cuda.h (and
# include/cudaTypedefs.h, which the build's driver map is made from) is
# there: $CUDA_HOME, nvcc's on PATH, /usr/local/cuda, the newest
# /usr/local/cuda-*, /usr (Debian's nvidia-cuda-toolkit), or the headers
# of the NVIDIA wheels python3 has (nvidia/cuda_runtime, no nvcc).
find_cuda() {
    local c
    for c in ${CUDA_HOME:+"$CUDA_HOME"} \
             "$(command -v nvcc >/dev/null 2>&1 && cd "$(dirname "$(command -v nvcc)")/.." && pwd)" \
             /usr/local/cuda $(printf '%s\n' /usr/local/cuda-* | sort -V -r) /usr \
             "$("$PY" -c 'import nvidia.cuda_runtime as m, os; print(os.path.dirname(m.__file__) if m.__file__ else list(m.__path__)[0])' 2>/dev/null)"; do
        [ -n "$c" ] && [ -f "$c/include/cuda.h" ] && [ -f "$c/include/cudaTypedefs.h" ] &&
            { echo "$c"; return 0; }
    done
    return 1
}

# nvcc: the toolkit's, else the one on PATH, else none (the GPU kernels and
# the runtime probe are then not built; their steps SKIP).
find_nvcc() {
    if [ -x "$1/bin/nvcc" ]; then
        echo "$1/bin/nvcc"
    else
        command -v nvcc 2>/dev/null
    fi
}

HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    HAVE_GPU=1
fi
ARCH=sm_90
PTX_ARCH=compute_90       # the oldest we target: any newer GPU's driver JITs it
if [ "$HAVE_GPU" = 1 ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    case "$cap" in [0-9][0-9]|[0-9][0-9][0-9]) ARCH="sm_$cap"
        [ "$cap" -lt 90 ] && PTX_ARCH="compute_$cap" ;; esac
fi
CUDA=$(find_cuda) || CUDA=""
NVCC=""
[ -n "$CUDA" ] && NVCC=$(find_nvcc "$CUDA")
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -a)"
    echo "cuda_home: ${CUDA:-none}"
    echo "arch: $ARCH (PTX: $PTX_ARCH)"
    echo "nvcc: ${NVCC:-none}"
    [ -n "$NVCC" ] && "$NVCC" --version | tail -2
    [ "$HAVE_GPU" = 1 ] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
    "$PY" -c 'import jax; print("jax", jax.__version__)' 2>&1 | tail -1
} > "$OUT/env.txt" 2>&1
echo "check: results in $OUT (GPU: $([ "$HAVE_GPU" = 1 ] && echo yes || echo no), toolkit: ${CUDA:-none}, $ARCH)"

# The build tree: build/, or CHECK_BUILD (a test's own, make B=...).
BUILD=${CHECK_BUILD:-$ROOT/build}
TRAIN=$BUILD/bin/salus-train
INFER=$BUILD/bin/salus-infer
LIB=$BUILD/libsalus.so

# Where the driver comes from: the system's, or simgpu under --simgpu.
RUNENV=()
if [ "$SIMGPU" = 1 ]; then
    RUNENV=(env "LD_LIBRARY_PATH=$BUILD/sim" "SIMGPU_STATE=/$TAG-sim" "SIMGPU_MEMORY=16G")
else
    RUNENV=(env)
fi
can_run_native() { [ "$HAVE_GPU" = 1 ] || [ "$SIMGPU" = 1 ]; }

# ---- 1. build ----------------------------------------------------------------

step_build() {
    local log=$OUT/build.log
    if [ -z "$CUDA" ]; then
        result SKIP build "no CUDA toolkit: no cuda.h found (set CUDA_HOME)"
        return
    fi
    # deps.sh wants every package of the tree (libelf for simgpu, ncurses
    # for salus-top); a GPU machine without a network may lack them, and
    # apt-get may hang on an unreachable mirror: bounded, and the targets
    # checked here need only the toolkit and a C compiler.
    # make's own name for the tree (build/, relative, unless CHECK_BUILD).
    local bt=build mk=(make --no-print-directory CUDA_HOME="$CUDA")
    [ -n "${CHECK_BUILD:-}" ] && { bt=$CHECK_BUILD; mk+=(B="$bt"); }
    if ! timeout "$(tmo 120)" "${mk[@]}" deps >"$log" 2>&1; then
        echo "check: deps.sh failed or timed out (offline?): building the GPU targets without it" >>"$log"
        mkdir -p "$bt" && touch "$bt/.deps-build"
    fi
    local targets=("$bt/libsalus.so" "$bt/bin/salus")
    [ -n "$NVCC" ] && targets+=("$bt/bin/salus-train" "$bt/bin/salus-infer" gpucheck
                                "$bt/tests/clients/cudart_probe")
    targets+=("$bt/tests/clients/nvmlclient")
    [ "$SIMGPU" = 1 ] && targets+=("$bt/sim/libcuda.so.1" "$bt/sim/libnvidia-ml.so.1")
    local t0 rc
    t0=$(date +%s)
    timeout "$(tmo 240)" "${mk[@]}" -j"$(nproc)" NVCC="${NVCC:-false}" \
        CUDA_ARCH="$ARCH" CUDA_PTX_ARCH="$PTX_ARCH" "${targets[@]}" >>"$log" 2>&1
    rc=$?
    if [ "$rc" = 0 ] && [ -e "$LIB" ] && [ -z "$NVCC" ]; then
        result FAIL build "libsalus built with $CUDA, but no nvcc: no kernels, workloads or probes; set CUDA_HOME to a toolkit with bin/nvcc"
    elif [ "$rc" = 0 ] && [ -x "$TRAIN" ] && [ -e "$LIB" ]; then
        result PASS build "make CUDA_ARCH=$ARCH CUDA_PTX_ARCH=$PTX_ARCH with $CUDA in $(( $(date +%s) - t0 ))s"
    else
        result FAIL build "make exited $rc; see build.log"
    fi
}

# ---- 2. overhead of libsalus on one job --------------------------------------

# median of numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# run_job NAME PRELOAD(0|1) PROGRAM ARGS...: the job's JSON in $OUT/NAME.json
run_job() {
    local name=$1 pre=$2
    shift 2
    local extra=()
    [ "$pre" = 1 ] && extra=("LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$name" "SALUS_POLICY=fair"
                             "SALUS_REPORT=$OUT/$name.report.jsonl")
    timeout "$(tmo 60)" "${RUNENV[@]}" "${extra[@]}" "$@" --name "$name" >"$OUT/$name.json" 2>"$OUT/$name.err"
}

step_overhead() {
    out_of_time overhead && return
    if ! can_run_native || [ ! -x "$TRAIN" ]; then
        result SKIP overhead "$([ -x "$TRAIN" ] && echo "no GPU" || echo "not built")"
        return
    fi
    # A realistic job (iterations of 50 kernels of 200 us) and a launch-bound
    # one (1000 empty kernels per iteration), plain and preloaded, alternated
    # three times; medians.
    local real=(--iterations 100 --kernels 50 --aux-kernels 0 --kernel-us 200)
    local bound=(--iterations 20 --kernels 1000 --aux-kernels 0 --kernel-us 0)
    local i p s pb sb failed=0
    for i in 1 2 3; do
        run_job "ovh-real-plain-$i" 0 "$TRAIN" "${real[@]}" || failed=1
        run_job "ovh-real-salus-$i" 1 "$TRAIN" "${real[@]}" || failed=1
        run_job "ovh-bound-plain-$i" 0 "$TRAIN" "${bound[@]}" || failed=1
        run_job "ovh-bound-salus-$i" 1 "$TRAIN" "${bound[@]}" || failed=1
    done
    if [ "$failed" = 1 ]; then
        result FAIL overhead "a salus-train run failed; see ovh-*.err"
        return
    fi
    p=$(for i in 1 2 3; do jget "$OUT/ovh-real-plain-$i.json" iter_ms_mean; done | median)
    s=$(for i in 1 2 3; do jget "$OUT/ovh-real-salus-$i.json" iter_ms_mean; done | median)
    pb=$(for i in 1 2 3; do jget "$OUT/ovh-bound-plain-$i.json" iter_ms_mean; done | median)
    sb=$(for i in 1 2 3; do jget "$OUT/ovh-bound-salus-$i.json" iter_ms_mean; done | median)
    local verdict figures
    verdict=$(py 'import sys
p,s,pb,sb=map(float,sys.argv[1:5])
pct=100*(s/p-1); ns=(sb-pb)*1e6/1000
print("PASS" if pct < 3 else "FAIL", "iteration %.3f ms plain, %.3f ms with libsalus (%+.2f%%); launch-bound: %+.0f ns per launch" % (p,s,pct,ns))' "$p" "$s" "$pb" "$sb")
    figures=${verdict#* }
    result "${verdict%% *}" overhead-train "${figures:-no figures (see py.log)}"

    # salus-infer: back-to-back requests, latency p50 plain and preloaded.
    local inf=(--rate 0 --requests 300 --kernels 10 --aux-kernels 0 --kernel-us 100)
    run_job ovh-infer-plain 0 "$INFER" "${inf[@]}" && run_job ovh-infer-salus 1 "$INFER" "${inf[@]}" || failed=1
    if [ "$failed" = 1 ]; then
        result FAIL overhead-infer "a salus-infer run failed; see ovh-infer-*.err"
        return
    fi
    verdict=$(py 'import sys
p,s=map(float,sys.argv[1:3])
print("PASS" if s <= p*1.05 + 0.05 else "FAIL", "request latency p50 %.3f ms plain, %.3f ms with libsalus" % (p,s))' \
        "$(jget "$OUT/ovh-infer-plain.json" latency_ms_p50)" "$(jget "$OUT/ovh-infer-salus.json" latency_ms_p50)")
    figures=${verdict#* }
    result "${verdict%% *}" overhead-infer "${figures:-no figures (see py.log)}"
}

# ---- 3. two jobs under fair and under priority --------------------------------

# two_jobs POLICY PRIO_A PRIO_B DELAY_B: job A, then B DELAY_B seconds later,
# sharing one table; their JSON in $OUT/POLICY-{a,b}.json.
two_jobs() {
    local pol=$1 pa=$2 pb=$3 delay=$4
    local job=(--iterations 200 --kernels 10 --aux-kernels 0 --kernel-us 1000)
    local common=("LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$pol" "SALUS_POLICY=$pol"
                  "SALUS_REPORT=$OUT/$pol.report.jsonl")
    rm -f "$OUT/$pol.report.jsonl"
    timeout "$(tmo 60)" "${RUNENV[@]}" "${common[@]}" "SALUS_PRIORITY=$pa" "$TRAIN" "${job[@]}" --name "$pol-a" \
        >"$OUT/$pol-a.json" 2>"$OUT/$pol-a.err" &
    local a=$!
    sleep "$delay"
    timeout "$(tmo 60)" "${RUNENV[@]}" "${common[@]}" "SALUS_PRIORITY=$pb" "$TRAIN" "${job[@]}" --name "$pol-b" \
        >"$OUT/$pol-b.json" 2>"$OUT/$pol-b.err" &
    local b=$!
    local ra=0 rb=0
    wait "$a" || ra=$?
    wait "$b" || rb=$?
    [ "$ra" = 0 ] && [ "$rb" = 0 ]
}

step_sched() {
    out_of_time fair && return
    if ! can_run_native || [ ! -x "$TRAIN" ]; then
        result SKIP fair "$([ -x "$TRAIN" ] && echo "no GPU" || echo "not built")"
        result SKIP priority "$([ -x "$TRAIN" ] && echo "no GPU" || echo "not built")"
        return
    fi
    # The judgement reads both JSON lines and the SALUS_REPORT: fair when the
    # two jobs (equal work, started together) end within 20% of each other
    # and the GPU changed hands; priority when the later, higher job ends
    # first and the lower one waited.
    local judge='import json,sys
pol,out=sys.argv[1],sys.argv[2]
def res(n):
    return json.loads([l for l in open(f"{out}/{pol}-{n}.json") if l.startswith("{")][-1])
a,b=res("a"),res("b")
rep=[json.loads(l) for l in open(f"{out}/{pol}.report.jsonl") if l.strip()]
sw=sum(r.get("switches",0) for r in rep)
h50=max([r.get("handoff_us_p50",0) for r in rep] or [0]); h99=max([r.get("handoff_us_p99",0) for r in rep] or [0])
held={r["pid"]:r.get("gpu_held_ms",0) for r in rep}; waited={r["pid"]:r.get("waited_ms",0) for r in rep}
ja,jb=a["jct_s"],b["jct_s"]
if pol=="fair":
    ok=min(ja,jb)/max(ja,jb)>0.8 and sw>=2
    fig="JCT %.2f s / %.2f s (ratio %.2f), GPU held %.0f / %.0f ms" % (ja,jb,min(ja,jb)/max(ja,jb),held.get(a["pid"],0),held.get(b["pid"],0))
else:
    ok=b["end_ns"]<a["end_ns"] and waited.get(a["pid"],0)>waited.get(b["pid"],0)
    fig="high job (later) JCT %.2f s, low job JCT %.2f s; waited %.0f ms (low) vs %.0f ms (high)" % (jb,ja,waited.get(a["pid"],0),waited.get(b["pid"],0))
print("PASS" if ok else "FAIL", fig+"; %d switches, handoff p50 %.1f us, p99 %.1f us" % (sw,h50,h99))'
    local verdict
    if two_jobs fair 50 50 0; then
        verdict=$(py "$judge" fair "$OUT")
        result "${verdict%% *}" fair "${verdict#* }"
    else
        result FAIL fair "a job failed; see fair-*.err"
    fi
    # priority: the low job (10) starts first, the high one (90) 0.3 s later.
    if two_jobs priority 10 90 0.3; then
        verdict=$(py "$judge" priority "$OUT")
        result "${verdict%% *}" priority "${verdict#* }"
    else
        result FAIL priority "a job failed; see priority-*.err"
    fi
}

# ---- 4. PyTorch ------------------------------------------------------------------

FW=${CHECK_FRAMEWORKS:-$ROOT/bench/gpu/frameworks.py}   # a test double may stand in
torch_ready() {
    [ "$HAVE_GPU" = 1 ] && [ -e "$LIB" ] &&
        timeout "$(tmo 120)" "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' \
            >/dev/null 2>&1
}

step_torch() {
    if ! torch_ready; then
        local why="no GPU"
        [ "$HAVE_GPU" = 1 ] && why="python3 has no PyTorch with CUDA (or libsalus is not built)"
        for s in torch-fair torch-oom torch-account-expandable torch-account-async; do
            result SKIP "$s" "$why"
        done
        return
    fi
    local env=("LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-torch" "SALUS_POLICY=fair"
               "SALUS_REPORT=$OUT/torch-fair.report.jsonl")
    if ! out_of_time torch-fair; then
        rm -f "$OUT/torch-fair.report.jsonl"
        timeout "$(tmo 150)" env "${env[@]}" "$PY" "$FW" train --steps 300 --out "$OUT/torch-a.steps.json" \
            >"$OUT/torch-a.json" 2>"$OUT/torch-a.err" &
        local a=$!
        timeout "$(tmo 150)" env "${env[@]}" "$PY" "$FW" train --steps 300 --seed 2 --out "$OUT/torch-b.steps.json" \
            >"$OUT/torch-b.json" 2>"$OUT/torch-b.err" &
        local b=$! ra=0 rb=0
        wait "$a" || ra=$?
        wait "$b" || rb=$?
        if [ "$ra" != 0 ] || [ "$rb" != 0 ]; then
            result FAIL torch-fair "a training process failed (exit $ra, $rb); see torch-*.err"
        else
            local verdict
            verdict=$(py 'import json,sys
out=sys.argv[1]
A=json.load(open(out+"/torch-a.steps.json")); B=json.load(open(out+"/torch-b.steps.json"))
lo=max(A["start"],B["start"]); hi=min(A["stamps"][-1],B["stamps"][-1])
na=sum(1 for t in A["stamps"] if lo<=t<=hi); nb=sum(1 for t in B["stamps"] if lo<=t<=hi)
rep={r["pid"]:r for r in (json.loads(l) for l in open(out+"/torch-fair.report.jsonl") if l.strip())}
ra,rb=rep.get(A["pid"],{}),rep.get(B["pid"],{})
ok=hi>lo and na>0 and nb>0 and all(r.get("launches",0)>0 and r.get("syncs",0)>0 for r in (ra,rb))
print("PASS" if ok else "FAIL","in the %.1f s both ran: %d and %d steps; launches %s / %s, syncs %s / %s, switches %s / %s" % (max(0,hi-lo),na,nb,ra.get("launches"),rb.get("launches"),ra.get("syncs"),rb.get("syncs"),ra.get("switches"),rb.get("switches")))' "$OUT")
            result "${verdict%% *}" torch-fair "${verdict#* }"
        fi
    fi

    if ! out_of_time torch-oom; then
        local lim=$((4 << 30)) line verdict
        line=$(timeout "$(tmo 90)" env "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-oom" "SALUS_MEM_LIMIT=4G" \
            "SALUS_REPORT=$OUT/torch-oom.report.jsonl" "$PY" "$FW" oom --limit "$lim" \
            2>"$OUT/torch-oom.err" | tail -1)
        echo "$line" > "$OUT/torch-oom.json"
        verdict=$(py 'import json,sys
d=json.loads(sys.argv[1] or "{}")
ok=d.get("raised") is True and d.get("went_on") is True and d.get("exception")=="OutOfMemoryError"
print("PASS" if ok else "FAIL","6 GiB under SALUS_MEM_LIMIT=4G: raised %s (%s), went on: %s" % (d.get("raised"),d.get("exception"),d.get("went_on")))' "$line")
        result "${verdict%% *}" torch-oom "${verdict#* }"
    fi

    local conf name
    for conf in "expandable_segments:True" "backend:cudaMallocAsync"; do
        name=torch-account-$([ "$conf" = "expandable_segments:True" ] && echo expandable || echo async)
        out_of_time "$name" && continue
        local line verdict
        line=$(timeout "$(tmo 90)" env "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$name" "SALUS_MEM_LIMIT=8G" \
            "PYTORCH_CUDA_ALLOC_CONF=$conf" "$PY" "$FW" account --mib 2048 \
            2>"$OUT/$name.err" | tail -1)
        echo "$line" > "$OUT/$name.json"
        verdict=$(py 'import json,sys
d=json.loads(sys.argv[1] or "{}")
r,u,u0=d.get("reserved"),d.get("salus_used"),d.get("salus_used_before") or 0
if not r or u is None:
    print("FAIL no figures:", d); sys.exit()
u-=u0
print("PASS" if abs(u-r)<=0.05*r else "FAIL","memory_reserved %.0f MiB, libsalus counts %.0f MiB (%+.1f%%)" % (r/2**20,u/2**20,100*(u-r)/r))' "$line")
        result "${verdict%% *}" "$name" "${verdict#* }"
    done
}

# ---- 5. JAX ------------------------------------------------------------------------

step_jax() {
    out_of_time jax && return
    if [ "$HAVE_GPU" != 1 ] || [ ! -e "$LIB" ]; then
        result SKIP jax "no GPU"
        return
    fi
    local line rc=0 verdict
    # The exit status of the run itself (a PIPESTATUS read after $(... | tail)
    # would be the assignment's, always 0).
    timeout "$(tmo 120)" env "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-jax" "SALUS_MEM_LIMIT=8G" \
        "$PY" "$FW" jax >"$OUT/jax.out" 2>"$OUT/jax.err" || rc=$?
    line=$(tail -1 "$OUT/jax.out")
    echo "$line" > "$OUT/jax.json"
    if [ "$rc" = 3 ] || case "$line" in *'"skip"'*) true ;; *) false ;; esac; then
        result SKIP jax "$(py 'import json,sys; print(json.loads(sys.argv[1]).get("skip"))' "$line")"
        return
    fi
    verdict=$(py 'import json,sys
d=json.loads(sys.argv[1] or "{}")
pre=d.get("bytes_limit") or d.get("view_used")
if not pre:
    print("FAIL no figures:", d); sys.exit()
f=pre/(8*2**30)
print("PASS" if 0.70<=f<=0.80 else "FAIL","preallocated %.2f GiB = %.0f%% of 8 GiB (view total %.2f GiB, used %.2f GiB)" % (pre/2**30,100*f,(d.get("view_total") or 0)/2**30,(d.get("view_used") or 0)/2**30))' "$line")
    result "${verdict%% *}" jax "${verdict#* }"
}

# ---- 6. third-party clients --------------------------------------------------------

# The clients of make test (tests/clients/*.py, tests/test_clients.c), each
# beside a salus-train peer under fair and under SALUS_MEM_LIMIT=64M, judged
# as there: what the client says it did against libsalus's report (launches
# and the export they went through, allocations, frees, bytes, refusals at
# the limit) and the own view it read.  Their packages come from build/venv
# (mk/venv.sh, where PyPI is reachable) or else from python3; a client whose
# package is in neither is SKIPped, saying which.
CLIENTS=$ROOT/tests/clients
VENV_PY=$BUILD/venv/bin/python
[ -e "$BUILD/venv/.ready" ] || VENV_PY=$PY
DEB_PY=${CHECK_NUMBA056_PYTHON:-/usr/bin/python3}
CLIENT_LIMIT=$((64 << 20))

# client_run NAME PYTHON SCRIPT MODE [VAR=value...]: the client's stdout in
# $OUT/NAME.json, its report in $OUT/NAME.report.jsonl; its exit status.
client_run() {
    local name=$1 python=$2 script=$3 mode=$4
    shift 4
    local common=("LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$name" "SALUS_POLICY=fair")
    rm -f "$OUT/$name.report.jsonl" "$OUT/$name-peer.report.jsonl"
    timeout "$(tmo 60)" "${RUNENV[@]}" "${common[@]}" "SALUS_REPORT=$OUT/$name-peer.report.jsonl" \
        "$TRAIN" --seconds 60 --kernels 4 --aux-kernels 0 --kernel-us 500 --host-ms 1 --name "$name-peer" \
        >"$OUT/$name-peer.json" 2>"$OUT/$name-peer.err" &
    local peer=$! rc=0
    timeout "$(tmo 120)" "${RUNENV[@]}" "${common[@]}" "SALUS_REPORT=$OUT/$name.report.jsonl" \
        "SALUS_MEM_LIMIT=64M" "PATH=$CUDA/bin:$PATH" "PYTHONDONTWRITEBYTECODE=1" "PYTHONWARNINGS=ignore" "$@" \
        "$python" "$CLIENTS/$script.py" "$BUILD/workloads/kernels.cubin" $mode \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    kill -TERM "$peer" 2>/dev/null
    wait "$peer" 2>/dev/null
    return "$rc"
}

# client_judge NAME: PASS or FAIL and the figures of a client that did its work.
client_judge() {
    py 'import json,sys
out,name,limit=sys.argv[1],sys.argv[2],int(sys.argv[3])
did=json.loads([l for l in open(f"{out}/{name}.json") if l.startswith("{")][-1])
rep=[json.loads(l) for l in open(f"{out}/{name}.report.jsonl") if l.strip()][-1]
calls=rep.get("calls",{})
checks={"launches":rep["launches"]==did["launches"]>0,
 "launch export":calls.get(did["launch_export"])==did["launches"],
 "allocs":rep["allocs"]==did["allocs"],"frees":rep["frees"]==did["frees"],
 "bytes":rep["bytes_allocated"]==did["bytes"],
 "refusals":rep["oom_refusals"]==did["refused"]>=1,"limit":rep["mem_limit_bytes"]==limit,
 "view":did["view_total"]==limit and did["view_free"]==limit-did["view_held"]}
bad=[k for k,ok in checks.items() if not ok]
print("FAIL" if bad else "PASS","%d launches through %s, %d allocations, %d refused at 64 MiB, own view %.1f of %.1f MiB free%s" % (did["launches"],did["launch_export"],did["allocs"],rep["oom_refusals"],did["view_free"]/2**20,did["view_total"]/2**20,("; wrong: "+", ".join(bad)) if bad else ""))' \
        "$OUT" "$1" "$CLIENT_LIMIT"
}

# client_step NAME PYTHON MODULE SCRIPT MODE [VAR=value...]
client_step() {
    local name=$1 python=$2 module=$3 script=$4 mode=$5
    shift 5
    out_of_time "$name" && return
    if ! timeout "$(tmo 60)" "${RUNENV[@]}" "$python" -c "import $module" >/dev/null 2>&1; then
        result SKIP "$name" "$python has no $module (make build/venv/.ready where PyPI is reachable)"
        return
    fi
    if ! client_run "$name" "$python" "$script" "$mode" "$@"; then
        result FAIL "$name" "the client failed; see $name.err"
        return
    fi
    local verdict
    verdict=$(client_judge "$name")
    result "${verdict%% *}" "$name" "${verdict#* }"
}

step_clients() {
    if ! can_run_native || [ ! -x "$TRAIN" ] || [ ! -e "$BUILD/workloads/kernels.cubin" ]; then
        result SKIP clients "$([ -x "$TRAIN" ] && echo "no GPU" || echo "not built")"
        return
    fi
    client_step client-cuda-bindings "$VENV_PY" cuda.bindings.driver cubindings ""
    client_step client-cuda-bindings-ptds "$VENV_PY" cuda.bindings.driver cubindings "" \
        CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1
    client_step client-cuda-core "$VENV_PY" cuda.core cucore ""
    client_step client-numba-cuda "$VENV_PY" numba.cuda numbacuda ""
    client_step client-pycuda "$VENV_PY" pycuda.driver pycudaclient ""
    local drv=()
    [ "$SIMGPU" = 1 ] && drv=("NUMBA_CUDA_DRIVER=$BUILD/sim/libcuda.so.1")
    client_step client-numba056 "$DEB_PY" numba.cuda numba056 binding "${drv[@]}"
    # Its high-level API: CUDA 12's prototype of cuCtxGetDevice_v2 fails on a
    # CUDA 13 driver (CUDA_ERROR_INVALID_CONTEXT), with libsalus as without.
    out_of_time client-numba056-v2 && return
    if timeout "$(tmo 60)" "$DEB_PY" -c "import numba.cuda" >/dev/null 2>&1; then
        local rc=0 line
        client_run client-numba056-v2 "$DEB_PY" numba056 highlevel "${drv[@]}" || rc=$?
        line=$(tail -1 "$OUT/client-numba056-v2.json")
        case "$rc:$line" in
        *'"code": 201, "error": "cuCtxGetDevice"'*)
            result PASS client-numba056-v2 "fails as documented: $line" ;;
        0:*) result PASS client-numba056-v2 "works (a driver before CUDA 13): $line" ;;
        *) result FAIL client-numba056-v2 "exit $rc: $line; see client-numba056-v2.err" ;;
        esac
    else
        result SKIP client-numba056-v2 "$DEB_PY has no numba.cuda"
    fi
}

# ---- run -----------------------------------------------------------------------------

# ---- 8. NVML: the job's view ------------------------------------------------------

# nvmlclient (tests/clients) beside a peer, both under libsalus, the job under
# SALUS_MEM_LIMIT=1G, then without libsalus (the control): NVML's memory
# against cuMemGetInfo's, its process list against the table's.
step_nvml() {
    out_of_time nvml && return
    local c=$BUILD/tests/clients/nvmlclient tbl=/$TAG-nvml
    if ! can_run_native || [ ! -x "$c" ] || [ ! -e "$LIB" ]; then
        result SKIP nvml "$([ -x "$c" ] && echo "no GPU" || echo "tests/clients/nvmlclient is not built")"
        return
    fi
    local env=("${RUNENV[@]}" "LD_PRELOAD=$LIB" "SALUS_TABLE=$tbl")
    rm -f "$OUT"/nvml-*.json
    timeout "$(tmo 120)" "${env[@]}" "$c" 256 hold >"$OUT/nvml-peer.json" 2>"$OUT/nvml-peer.err" &
    local peer=$!
    if ! await_line "$OUT/nvml-peer.json" '"step":0' 30; then
        kill "$peer" 2>/dev/null
        result FAIL nvml "the peer said nothing in 30 s; see nvml-peer.err"
        return
    fi
    timeout "$(tmo 60)" "${env[@]}" SALUS_MEM_LIMIT=1G "$c" 128 >"$OUT/nvml-job.json" 2>"$OUT/nvml-job.err"
    timeout "$(tmo 60)" "${RUNENV[@]}" "$c" 128 >"$OUT/nvml-plain.json" 2>"$OUT/nvml-plain.err"
    kill "$peer" 2>/dev/null
    wait "$peer" 2>/dev/null
    verdict nvml "$(py 'import json, sys
def last(p):
    try:
        return json.loads([l for l in open(p) if l.startswith("{")][-1])
    except Exception:
        return None
peer, job, plain = (last(sys.argv[1] + "/nvml-%s.json" % n) for n in ("peer", "job", "plain"))
if not (peer and job and plain):
    print("FAIL a client said nothing (nvml-*.err)")
    sys.exit()
G = 1 << 30
want = ",".join(str(p) for p in sorted((peer["pid"], job["pid"])))
bad = [w for w, ok in (
    ("NVML total %d is not the limit" % job["v1_total"], job["v1_total"] == G),
    ("NVML free %d is not cuMemGetInfo free %d" % (job["v1_free"], job["cu_free"]),
     job["v1_free"] == job["cu_free"]),
    ("total is not used + free", job["v1_total"] == job["v1_used"] + job["v1_free"]),
    ("_v2 differs", job["v2_free"] == job["v1_free"]),
    ("processes %s, the table has %s" % (job["procs_v3"], want), job["procs_v3"] == want),
    ("%d of %d names wrapped" % (job["wrapped"], job["hooked"]), job["wrapped"] == job["hooked"]),
    ("the control is not the whole device", plain["v1_total"] > G and plain["wrapped"] == 0),
    ("the control does not list the peer",
     str(peer["pid"]) in plain["procs_v3"].split(","))) if not ok]
M = 1 << 20
print("%s limit 1G: NVML used %d MiB free %d MiB (cuMemGetInfo free %d MiB), processes %s; "
      "without libsalus total %d MiB, processes %s%s" % (
      "FAIL" if bad else "PASS", job["v1_used"] // M, job["v1_free"] // M, job["cu_free"] // M,
      job["procs_v3"], plain["v1_total"] // M, plain["procs_v3"],
      "; " + "; ".join(bad) if bad else ""))' "$OUT")"
}

# ---- 5. issue 11: sharing on a real GPU ----------------------------------------------

. "$ROOT/bench/gpu/sharing.sh"

# want STEP: whether CHECK_STEPS (a comma list; all when unset) names STEP.
want() {
    [ -z "${CHECK_STEPS:-}" ] && return 0
    case ",$CHECK_STEPS," in *",$1,"*) return 0 ;; esac
    return 1
}

want build && step_build
want overhead && step_overhead
want sched && step_sched
want overlap && step_overlap
want procaddr && step_procaddr
want torch && step_torch
{ want torch-sharing || [[ ",${CHECK_STEPS:-}," == *,torch-[grscl]* ]]; } && step_torch_sharing
want jax && step_jax
want clients && step_clients
want nvml && step_nvml

ELAPSED=$(( $(date +%s) - START ))
printf '{"pass":%d,"fail":%d,"skip":%d,"seconds":%d,"gpu":%d,"simgpu":%d,"arch":"%s","cuda_home":"%s"}\n' \
    "$NPASS" "$NFAIL" "$NSKIP" "$ELAPSED" "$HAVE_GPU" "$SIMGPU" "$ARCH" "${CUDA:-}" > "$OUT/summary.json"
# The table the closing note quotes: what ran, on what, and every step.
GPU_DESC="no GPU"
[ "$HAVE_GPU" = 1 ] && GPU_DESC=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null |
                                  head -1 | sed 's/, */, driver /')
[ "$SIMGPU" = 1 ] && GPU_DESC="simgpu (figures mean nothing)"
{
    echo "bench/gpu/check.sh on ${GPU_DESC:-an unnamed GPU}, $(date -u +%F), Salus $(cat "$ROOT/VERSION" 2>/dev/null)" \
         "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null): $NPASS passed, $NFAIL failed, $NSKIP skipped in ${ELAPSED}s"
    echo
    "$PY" "$ROOT/bench/gpu/judge.py" table "$OUT/summary.txt" 2>>"$OUT/judge.log"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
echo
echo "check: $NPASS passed, $NFAIL failed, $NSKIP skipped in ${ELAPSED}s (summary.txt, summary.json, summary.md in $OUT)" |
    tee -a "$OUT/summary.txt"
[ "$NFAIL" = 0 ]
