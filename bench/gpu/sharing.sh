# bench/gpu/sharing.sh - the steps of bench/gpu/check.sh that check issue
# 11 on a real GPU: exclusive handoffs, stream capture, memory the driver
# can give, the paths PyTorch takes into the driver.  Sourced by check.sh,
# whose helpers it uses (result, out_of_time, tmo, py, RUNENV, LIB, OUT,
# TAG, ...); the judgements are bench/gpu/judge.py's, the PyTorch processes
# bench/gpu/torch_sharing.py's.
#
#   overlap-POLICY-PATTERN  two overlap.c processes (stamp.cu's fixed-work
#                  kernel over every SM) under fair and under pack, in the
#                  patterns side, poll, queue32, threads and kill (one
#                  SIGKILLed with 32 launches queued): the fraction of time
#                  their kernels overlapped (goal 0 but under pack)
#   procaddr-*     SALUS_LOG=debug: for each wrapped export the CUDA runtime
#                  (and PyTorch) asked cuGetProcAddress for, whether the
#                  driver's answer was the export itself; the ones the guard
#                  passed through; FAIL if a launch export was among them
#   torch-graph    torch.cuda.graph capture while a peer waits, quantum 1 ms
#   torch-retain   cudaMallocAsync keeps freed memory: Salus counts it
#   torch-six      six processes with cuBLAS and cuDNN loaded take, one after
#                  the other, their view's free minus 1 GiB: no driver OOM;
#                  budgets beside the driver's free memory
#   torch-compile  a torch.compile (Triton) function: per-hook counts
#   torch-loader   DataLoader(num_workers=2, fork) holder SIGKILLed: the peer
#                  goes on and the memory comes back
#   torch-ipc      torch.multiprocessing shares a CUDA tensor (CUDA IPC on
#                  the caching allocator's segment) with SALUS_SWAP=on, where
#                  libsalus makes the handles: each side sees the other's
#                  values
#
# Over simgpu (--simgpu) the overlap and procaddr-cudart steps run (the
# trace's submit-to-end intervals stand in for the stamps, which simgpu's
# kernels do not write); the torch steps run only with a test double
# (CHECK_TORCH_SHARING), and SKIP otherwise.

GPUCHECK=$BUILD/gpucheck
JUDGE=$ROOT/bench/gpu/judge.py
TS=${CHECK_TORCH_SHARING:-$ROOT/bench/gpu/torch_sharing.py}   # a test double may stand in
OVERLAP_LAUNCHES=${CHECK_OVERLAP_LAUNCHES:-64}

# judge ARGS...: judge.py's verdict line, "FAIL judge.py failed" if none.
judge() {
    local v
    v=$("$PY" "$JUDGE" "$@" 2>>"$OUT/judge.log" | head -1)
    echo "${v:-FAIL judge.py failed (see judge.log)}"
}

# verdict NAME LINE: a judge's line as the step's result.
verdict() {
    result "${2%% *}" "$1" "${2#* }"
}

# await_line FILE TEXT SECONDS: 0 once FILE has a line containing TEXT.
await_line() {
    local end=$(( $(date +%s) + $3 ))
    while [ "$(date +%s)" -le "$end" ]; do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# nfiles DIR PREFIX: how many files DIR/PREFIX* there are.
nfiles() {
    local n=0 f
    for f in "$1/$2"*; do
        [ -e "$f" ] && n=$((n + 1))
    done
    echo "$n"
}

# driver_free_mib: the GPU's free memory in MiB as the driver counts it
# (nvidia-smi; over simgpu, cuMemGetInfo of a process without libsalus, its
# context included), or "n/a".
driver_free_mib() {
    local f
    if [ "$SIMGPU" = 1 ]; then
        f=$(timeout 20 "${RUNENV[@]}" "$PY" -c 'import ctypes
c = ctypes.CDLL("libcuda.so.1"); d = ctypes.c_int(); x = ctypes.c_void_p()
f, t = ctypes.c_size_t(), ctypes.c_size_t()
ok = (c.cuInit(0) == 0 and c.cuDeviceGet(ctypes.byref(d), 0) == 0 and
      c.cuDevicePrimaryCtxRetain(ctypes.byref(x), d) == 0 and c.cuCtxSetCurrent(x) == 0 and
      c.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)) == 0)
print(f.value >> 20 if ok else "")' 2>/dev/null)
    else
        f=$(timeout 10 nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null |
            head -1 | tr -d ' ')
    fi
    case "$f" in ''|*[!0-9]*) echo n/a ;; *) echo "$f" ;; esac
}

# ---- overlap ---------------------------------------------------------------

# await_waiter TABLE SECONDS: 0 once salus status shows a process waiting
# for the GPU on the table.
await_waiter() {
    local end=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -le "$end" ]; do
        timeout 5 "$BUILD/bin/salus" status --json -d 0 -t "$1" 2>/dev/null | py 'import json,sys
sys.exit(0 if json.loads(sys.stdin.read())["devices"][0]["waiters"] else 1)' && return 0
        sleep 0.05
    done
    return 1
}

# overlap_pair POLICY PATTERN: two overlap.c processes sharing one table;
# kill: A queues 32 launches (queue32), B (plain) starts and waits, A is
# SIGKILLed.
overlap_pair() {
    local pol=$1 pat=$2 name=overlap-$1-$2
    local env=("${RUNENV[@]}" "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$name" "SALUS_POLICY=$pol"
               "SALUS_REPORT=$OUT/$name.report.jsonl")
    [ "$SIMGPU" = 1 ] && env+=("SIMGPU_TRACE=$OUT/$name.trace" "SIMGPU_KERNEL_NS=2000000")
    local pa=$pat pb=$pat na=$OVERLAP_LAUNCHES
    # kill: A has 2048 launches (4 s of work) and holds the GPU for its whole
    # quantum (10 s), so that B is seen waiting before A dies, even on a
    # loaded machine.
    [ "$pat" = kill ] && { pa=queue32; pb=plain; na=2048; env+=("SALUS_QUANTUM_MS=10000"); }
    rm -f "$OUT/$name".* "$OUT/$name"-[ab].*
    local prog=("$GPUCHECK/overlap" --module "$GPUCHECK/stamp.cubin" --ms 2)
    timeout "$(tmo 60)" "${env[@]}" "${prog[@]}" --pattern "$pa" --launches "$na" \
        --stamps "/dev/shm/$TAG-$name-a" >"$OUT/$name-a.json" 2>"$OUT/$name-a.err" &
    local a=$! ra=0 rb=0
    if [ "$pat" = kill ]; then
        await_line "$OUT/$name-a.json" '"queued"' 30
    fi
    timeout "$(tmo 60)" "${env[@]}" "${prog[@]}" --pattern "$pb" --launches "$OVERLAP_LAUNCHES" \
        --stamps "/dev/shm/$TAG-$name-b" >"$OUT/$name-b.json" 2>"$OUT/$name-b.err" &
    local b=$!
    if [ "$pat" = kill ]; then
        # A holds the GPU with 32 launches queued and B waits for it (under
        # pack, runs beside it): then A dies.
        if [ "$pol" = pack ]; then
            sleep 0.3              # B runs beside A, or is starting
        elif ! await_waiter "/$TAG-$name" 20; then
            echo "check: B was not seen waiting within 20 s; killing A all the same" >>"$OUT/$name-b.err"
        fi
        local apid
        apid=$(py 'import json,sys
print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"pid\"")][0]["pid"])' \
            "$OUT/$name-a.json")
        [ -n "$apid" ] && kill -KILL "$apid" 2>/dev/null
        wait "$a" 2>/dev/null
    else
        wait "$a" || ra=$?
    fi
    wait "$b" || rb=$?
    local s
    for s in a b; do
        cp "/dev/shm/$TAG-$name-$s" "$OUT/$name-$s.stamps" 2>/dev/null
        rm -f "/dev/shm/$TAG-$name-$s"
    done
    [ "$ra" = 0 ] && [ "$rb" = 0 ]
}

step_overlap() {
    if ! can_run_native || [ ! -x "$GPUCHECK/overlap" ] || [ ! -e "$LIB" ]; then
        result SKIP overlap "$([ -x "$GPUCHECK/overlap" ] && echo "no GPU" || echo "not built (make gpucheck)")"
        return
    fi
    local pol pat name trace=()
    for pol in fair pack; do
        for pat in side poll queue32 threads kill; do
            name=overlap-$pol-$pat
            out_of_time "$name" && return
            if ! overlap_pair "$pol" "$pat"; then
                result FAIL "$name" "a process failed; see $name-*.err"
                continue
            fi
            trace=()
            [ "$SIMGPU" = 1 ] && trace=(--trace "$OUT/$name.trace")
            verdict "$name" "$(judge overlap "$OUT" "$name" "${trace[@]}")"
        done
    done
}

# ---- cuGetProcAddress ----------------------------------------------------------

step_procaddr() {
    out_of_time procaddr && return
    local probe=$BUILD/tests/clients/cudart_probe
    if ! can_run_native || [ ! -e "$LIB" ]; then
        result SKIP procaddr "no GPU"
        return
    fi
    local env=("${RUNENV[@]}" "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-procaddr" "SALUS_LOG=debug")
    if [ -x "$probe" ]; then
        # The runtime resolves its whole table through libsalus (what this
        # step reads), then the probe does a little work.
        timeout "$(tmo 60)" "${env[@]}" "$probe" >"$OUT/procaddr-cudart.json" \
            2>"$OUT/procaddr-cudart.log"
        verdict procaddr-cudart "$(judge procaddr "$OUT/procaddr-cudart.log")"
    else
        result SKIP procaddr-cudart "build/tests/clients/cudart_probe is not built"
    fi
    if torch_sharing_ready; then
        timeout "$(tmo 120)" "${env[@]}" "$PY" "$TS" probe >"$OUT/procaddr-torch.json" \
            2>"$OUT/procaddr-torch.log"
        verdict procaddr-torch "$(judge procaddr "$OUT/procaddr-torch.log")"
    fi
}

# ---- PyTorch -----------------------------------------------------------------------

torch_sharing_ready() {
    [ -e "$LIB" ] || return 1
    [ -n "${CHECK_TORCH_SHARING:-}" ] && return 0        # the test double
    [ "$HAVE_GPU" = 1 ] &&
        timeout "$(tmo 120)" "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' \
            >/dev/null 2>&1
}

# tenv NAME [VAR=value...]: the environment of a PyTorch process of step NAME.
tenv() {
    local name=$1
    shift
    TENV=("${RUNENV[@]}" "LD_PRELOAD=$LIB" "SALUS_TABLE=/$TAG-$name" "SALUS_POLICY=fair"
          "SALUS_REPORT=$OUT/$name.report.jsonl" "$@")
}

# last_json FILE: the file's last JSON line, or {}.
last_json() {
    local l
    l=$(grep '^{' "$1" 2>/dev/null | tail -1)
    echo "${l:-{\}}"
}

torch_graph() {
    local name=torch-graph
    rm -f "$OUT/$name".* "$OUT/$name-peer".*
    tenv "$name" "SALUS_QUANTUM_MS=1"
    timeout "$(tmo 150)" "${TENV[@]}" "$PY" "$TS" spin --seconds 120 --until "$OUT/$name.done" \
        >"$OUT/$name-peer.json" 2>"$OUT/$name-peer.err" &
    local peer=$! rc=0 rp=0
    await_line "$OUT/$name-peer.json" '"spinning"' 60
    timeout "$(tmo 120)" "${TENV[@]}" "$PY" "$TS" graph --kernels 25 \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    touch "$OUT/$name.done"
    wait "$peer" || rp=$?
    verdict "$name" "$(py 'import json,sys
g,p,rc,rp,rep=json.loads(sys.argv[1]),json.loads(sys.argv[2]),sys.argv[3],sys.argv[4],sys.argv[5]
reps=[json.loads(l) for l in open(rep) if l.strip()] if rep else []
sw=sum(r.get("switches",0) for r in reps)
ok=rc=="0" and rp=="0" and g.get("captured") is True and g.get("same") is True and (p.get("steps") or 0)>0
print("PASS" if ok else "FAIL","captured %s kernels (%s), %s replays equal to eager: %s; peer %s steps; %d switches; exits %s/%s%s" % (g.get("kernels"),g.get("captured"),g.get("replays"),g.get("same"),p.get("steps"),sw,rc,rp,("; "+g["error"]) if g.get("error") else ""))' \
        "$(last_json "$OUT/$name.json")" "$(last_json "$OUT/$name-peer.json")" "$rc" "$rp" \
        "$([ -e "$OUT/$name.report.jsonl" ] && echo "$OUT/$name.report.jsonl")")"
}

torch_retain() {
    local name=torch-retain rc=0
    tenv "$name" "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"
    timeout "$(tmo 120)" "${TENV[@]}" "$PY" "$TS" retain --mib 1024 \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    verdict "$name" "$(py 'import json,sys
d,rc=json.loads(sys.argv[1]),sys.argv[2]
r,s=d.get("reserved_after_free"),d.get("salus_after_free")
if rc!="0" or r is None or s is None:
    print("FAIL exit %s, no figures: %s" % (rc,d)); sys.exit()
M=2**20
ok=abs(s-r)<=max(0.05*r,2*M)
print("PASS" if ok else "FAIL","after freeing 1 GiB: memory_reserved %.0f MiB, Salus counts %.0f MiB (held: %.0f / %.0f MiB)" % (r/M,s/M,d.get("reserved_held",0)/M,d.get("salus_held",0)/M))' \
        "$(last_json "$OUT/$name.json")" "$rc")"
}

torch_six() {
    local name=torch-six dir=$OUT/torch-six.d i pids=()
    rm -rf "$dir" "$OUT/$name".*
    mkdir -p "$dir"
    tenv "$name"
    for i in 0 1 2 3 4 5; do
        timeout "$(tmo 180)" "${TENV[@]}" "$PY" "$TS" take --dir "$dir" --index "$i" \
            >"$OUT/$name-$i.json" 2>"$OUT/$name-$i.err" &
        pids+=($!)
    done
    local end=$(( $(date +%s) + 120 ))
    while [ "$(nfiles "$dir" ready.)" -lt 6 ] && [ "$(date +%s)" -le "$end" ]; do
        sleep 0.1
    done
    touch "$dir/go"
    end=$(( $(date +%s) + 60 ))
    while [ "$(nfiles "$dir" took.)" -lt 6 ] && [ "$(date +%s)" -le "$end" ]; do
        sleep 0.1
    done
    local free
    free=$(driver_free_mib)
    touch "$dir/release"
    local rcs=""
    for i in "${pids[@]}"; do
        wait "$i"
        rcs="$rcs $?"
    done
    verdict "$name" "$(py 'import json,sys,glob
out,free,rcs=sys.argv[1],sys.argv[2],sys.argv[3].split()
rep={}
try:
    for l in open(out+"/torch-six.report.jsonl"):
        if l.strip():
            r=json.loads(l); rep[r.get("pid")]=r
except OSError:
    pass
rows=[]
for i in range(6):
    ls=[l for l in open(f"{out}/torch-six-{i}.json") if l.startswith("{")]
    rows.append(json.loads(ls[-1]) if ls else {})
G=2**30
driver_oom=[r.get("index") for r in rows if r.get("ok") is False and rep.get(r.get("pid"),{}).get("oom_refusals",0)==0]
refused=[r.get("index") for r in rows if r.get("ok") is False and r.get("index") not in driver_oom]
missing=[i for i,r in enumerate(rows) if "ok" not in r]
ok=not driver_oom and not missing and all(c=="0" for c in rcs)
bud=" ".join("%.1f" % ((r.get("view_free") or 0)/G) for r in rows)
took=" ".join("%.1f" % ((r.get("asked") or 0)/G if r.get("ok") else 0) for r in rows)
print("PASS" if ok else "FAIL","budgets (view free, GiB): %s; took: %s; refused by Salus: %s; driver OOM: %s; driver free while held: %s MiB%s" % (bud,took,refused or "none",driver_oom or "none",free,("; no result from "+str(missing)) if missing else ""))' \
        "$OUT" "$free" "$rcs")"
}

torch_compile() {
    local name=torch-compile rc=0
    rm -f "$OUT/$name".*
    tenv "$name"
    timeout "$(tmo 240)" "${TENV[@]}" "$PY" "$TS" compile --steps 20 \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    verdict "$name" "$(py 'import json,sys
d,rc,path=json.loads(sys.argv[1]),sys.argv[2],sys.argv[3]
try:
    rep=[json.loads(l) for l in open(path) if l.strip()][-1]
except (OSError,IndexError,ValueError):
    rep={}
calls={k:v for k,v in rep.get("calls",{}).items() if v}
launch=sum(v for k,v in calls.items() if k.startswith("cuLaunch"))
ok=rc=="0" and d.get("same") is True and launch>0
top=", ".join("%s %d" % kv for kv in sorted(calls.items(),key=lambda kv:-kv[1])[:8])
print("PASS" if ok else "FAIL","results equal to eager: %s; %d launches (cuLaunchKernelEx %d); hooks: %s%s" % (d.get("same"),launch,calls.get("cuLaunchKernelEx",0),top or "none",("; "+d["error"]) if d.get("error") else ""))' \
        "$(last_json "$OUT/$name.json")" "$rc" "$OUT/$name.report.jsonl")"
}

torch_loader() {
    local name=torch-loader
    rm -f "$OUT/$name".* "$OUT/$name"-*
    tenv "$name"
    local f0 f1 f2 f3
    f0=$(driver_free_mib)
    timeout "$(tmo 150)" "${TENV[@]}" "$PY" "$TS" loader --seconds 90 --hold-mib 1024 \
        --until "$OUT/$name.done" --out "$OUT/$name-peer.rows.json" \
        >"$OUT/$name-peer.json" 2>"$OUT/$name-peer.err" &
    local peer=$! rp=0
    await_line "$OUT/$name-peer.json" '"stepping"' 90
    f1=$(driver_free_mib)
    timeout "$(tmo 150)" "${TENV[@]}" "$PY" "$TS" loader --seconds 60 --hold-mib 4096 \
        --out "$OUT/$name-holder.rows.json" >"$OUT/$name-holder.json" 2>"$OUT/$name-holder.err" &
    local holder=$!
    await_line "$OUT/$name-holder.json" '"stepping"' 90
    f2=$(driver_free_mib)
    local hpid killed_at
    hpid=$(py 'import json,sys
print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][0]["pid"])' "$OUT/$name-holder.json")
    killed_at=$(date +%s.%N)
    [ -n "$hpid" ] && kill -KILL "$hpid" 2>/dev/null
    wait "$holder" 2>/dev/null
    # The memory comes back: the driver's free memory returns to what it was
    # with the peer alone (within 256 MiB), within 20 s.
    local end=$(( $(date +%s) + 20 ))
    f3=$(driver_free_mib)
    while [ "$f3" != n/a ] && [ "$f1" != n/a ] && [ "$f3" -lt $((f1 - 256)) ] &&
          [ "$(date +%s)" -le "$end" ]; do
        sleep 0.2
        f3=$(driver_free_mib)
    done
    timeout 20 "$BUILD/bin/salus" status --json -t "/$TAG-$name" >"$OUT/$name.status.json" 2>&1
    # The peer has gone on past the kill (a step stamped after it), or had 30 s to.
    end=$(( $(date +%s) + 30 ))
    while ! py 'import json,sys
rows=json.load(open(sys.argv[1]))["rows"]
sys.exit(0 if sum(1 for r in rows if r[0]>float(sys.argv[2]))>=5 else 1)' \
            "$OUT/$name-peer.rows.json" "$killed_at" && [ "$(date +%s)" -le "$end" ]; do
        sleep 0.2
    done
    touch "$OUT/$name.done"
    wait "$peer" || rp=$?
    verdict "$name" "$(py 'import json,sys
out,k,rp=sys.argv[1],float(sys.argv[2]),sys.argv[3]
f=sys.argv[4:8]
try:
    rows=json.load(open(out+"/torch-loader-peer.rows.json"))["rows"]
except (OSError,ValueError,KeyError):
    rows=[]
after=[r for r in rows if r[0]>k]
na="n/a" in f
back=na or int(f[3])>=int(f[1])-256
ok=rp=="0" and len(after)>0 and back
print("PASS" if ok else "FAIL","peer: %d steps after the SIGKILL (%d before); driver free MiB: %s alone, %s with the peer, %s with both, %s after the kill%s" % (len(after),len(rows)-len(after),f[0],f[1],f[2],f[3],"" if back else " (not back)"))' \
        "$OUT" "$killed_at" "$rp" "$f0" "$f1" "$f2" "$f3")"
}

torch_ipc() {
    local name=torch-ipc rc=0
    tenv "$name" "SALUS_SWAP=on"
    timeout "$(tmo 120)" "${TENV[@]}" "$PY" "$TS" ipc --mib 64 \
        >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    verdict "$name" "$(py 'import json,sys
d,rc=json.loads(sys.argv[1]),sys.argv[2]
ok=rc=="0" and d.get("child_saw") is True and d.get("parent_sees") is True and d.get("child_exit")==0
print("PASS" if ok else "FAIL","%s MiB shared with SALUS_SWAP=%s: the consumer saw the producer values: %s, the producer sees the consumer values: %s; exits %s/%s%s" % (d.get("mib"),d.get("swap"),d.get("child_saw"),d.get("parent_sees"),d.get("child_exit"),rc,("; "+d["error"]) if d.get("error") else ""))' \
        "$(last_json "$OUT/$name.json")" "$rc")"
}

step_torch_sharing() {
    local s
    if ! torch_sharing_ready; then
        local why="no GPU"
        [ "$HAVE_GPU" = 1 ] && why="python3 has no PyTorch with CUDA (or libsalus is not built)"
        for s in torch-graph torch-retain torch-six torch-compile torch-loader torch-ipc; do
            result SKIP "$s" "$why"
        done
        return
    fi
    for s in graph retain six compile loader ipc; do
        want torch-sharing || want "torch-$s" || continue
        out_of_time "torch-$s" && continue
        "torch_$s"
    done
}
