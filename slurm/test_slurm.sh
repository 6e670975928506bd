#!/bin/sh
# test_slurm: spank_salus.so under Slurm's own daemons.
#
#   build/tests/test_slurm        (make test runs it; root, Debian's slurmctld,
#                                  slurmd, munge and libslurm-dev installed)
#
# A private cluster of two nodes, all under a temporary directory: a munge
# key made here and munged on its own socket; slurmctld and two slurmd on
# free ports of 127.0.0.1 with their own state, spool and logs (the second
# with a /dev/shm of its own, as another machine); a fake GPU device file
# for gres.conf (GresTypes=gpu,shard: one GPU, four shards); the plugin in
# plugstack.conf with a group made for the test, whose two users, made for
# the test too, submit the jobs.  The node's GPU is simgpu's device 0 (of 2,
# one state shared by both users); the jobs are salus-train.  Everything is
# stopped and removed at the end, whatever happens (trap).
#
# Scenarios (each a cmocka-style line, counted by mk/run-tests.sh):
#   three_shard_jobs     three sbatch --gres=shard:1 --salus-priority jobs run
#                        at once, time-sliced (the trace), the high priority
#                        one first; salus-top lists them by job id
#   bad_value_refused    sbatch --salus-mem=20X fails at submission with
#                        salus run's message; nothing is queued
#   scancel_holder       the lease holder is cancelled: the others finish, the
#                        epilog logs that the job left nothing
#   two_users_one_lease  jobs of two users share the group's table, one of
#                        them seeing the GPUs as CUDA_VISIBLE_DEVICES=1,0:
#                        one device, one lease, time-sliced
#   array_two_nodes      a job array over two nodes (a second slurmd with a
#                        /dev/shm of its own, in its own mount namespace):
#                        each task in its own node's table
#   shard_limit          --gres=shard:2 of the GPU's 4 is a limit of half its
#                        memory (gres.conf's count), --gres=shard:1 a quarter,
#                        shown by salus-top; --salus-mem overrides it
# Every wait polls a state with a deadline; nothing sleeps and hopes.
set -u

B=$(cd "$(dirname "$0")/.." && pwd)
TESTS="three_shard_jobs bad_value_refused scancel_holder two_users_one_lease array_two_nodes shard_limit"
T0=$(date +%s)

say() { printf 'test_slurm: %s\n' "$*"; }
skip_all() {
    for t in $TESTS; do
        printf '[ RUN      ] %s\n[  SKIPPED ] %s: %s\n' "$t" "$t" "$1"
    done
    printf '[==========] %d test(s) run.\n' 6
    exit 0
}

# ---- can the daemons run here at all? ----------------------------------------
[ "$(id -u)" = 0 ] || skip_all "slurmd and munged must run as root to start jobs as their users"
for c in slurmctld slurmd munged sbatch squeue scontrol scancel useradd userdel groupadd \
         groupdel runuser python3; do
    command -v "$c" >/dev/null 2>&1 || skip_all "$c is not installed (make test installs it: mk/deps.sh slurm)"
done
for f in bin/salus bin/salus-top bin/salus-train workloads/kernels.cubin libsalus.so \
         sim/libcuda.so.1 slurm/spank_salus.so; do
    [ -e "$B/$f" ] || { echo "test_slurm: $B/$f is not built" >&2; exit 1; }
done

# ---- the private cluster ---------------------------------------------------------
tmp=$(mktemp -d /tmp/salus-slurm.XXXXXX)
chmod 755 "$tmp"
tag=$$
grp=salust$tag
ua=salusa$tag
ub=salusb$tag
node=salusn1
node2=salusn2
sim=/salus-slurm-$tag-sim
table=/salus-group-$grp
inst=$tmp/inst
export SLURM_CONF=$tmp/etc/slurm.conf
pids=""

cleanup() {
    # Jobs first (their slurmstepd outlive slurmd), then the daemons, by pid.
    if [ -n "$pids" ] && scontrol ping >/dev/null 2>&1; then
        scancel --quiet -u "$ua" 2>/dev/null; scancel --quiet -u "$ub" 2>/dev/null
        wait_until 20 "no job left" no_jobs || true
    fi
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do
        n=0
        while kill -0 "$p" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
        kill -9 "$p" 2>/dev/null
    done
    userdel "$ua" 2>/dev/null; userdel "$ub" 2>/dev/null; groupdel "$grp" 2>/dev/null
    rm -f "/dev/shm$sim" "/dev/shm$table"
    [ -n "${KEEP:-}" ] && { echo "kept $tmp"; return; }
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# wait_until <seconds> <what> <command...>: poll the command every 0.1 s.
wait_until() {
    limit=$1 what=$2; shift 2
    end=$(( $(date +%s) + limit ))
    while ! "$@"; do
        if [ "$(date +%s)" -ge "$end" ]; then
            say "waited ${limit}s for: $what"
            return 1
        fi
        sleep 0.1
    done
}
no_jobs() { [ -z "$(squeue -h -u "$ua,$ub" -o %i 2>/dev/null)" ]; }

free_ports() {
    python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))'
}

# The programs the jobs run, in a copy every user can read (the tree may
# sit in a home directory; a rebuild must not change them mid-test).
mkdir -p "$inst/bin" "$inst/lib" "$inst/sim" "$inst/workloads"
cp "$B/bin/salus" "$B/bin/salus-top" "$B/bin/salus-train" "$inst/bin/"
cp "$B/workloads/kernels.cubin" "$inst/workloads/"
cp "$B/libsalus.so" "$B/slurm/spank_salus.so" "$inst/lib/"
cp -P "$B/sim/libcuda.so.1" "$inst/sim/" 2>/dev/null || cp "$B/sim/libcuda.so.1" "$inst/sim/"
chmod -R a+rX "$inst"

# (Another run of this test may hold /etc/passwd's lock for a moment.)
wait_until 20 "groupadd $grp" groupadd "$grp" || skip_all "groupadd cannot make a group"
for u in "$ua" "$ub"; do
    wait_until 20 "useradd $u" useradd -M -N -g "$grp" -s /bin/sh -d "$tmp" "$u" ||
        skip_all "useradd cannot make a user"
done

mkdir -p "$tmp/etc" "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/dev" "$tmp/out"
chmod 1777 "$tmp/out"
# Slurm sets CUDA_VISIBLE_DEVICES only for character devices: these stand
# for the GPUs as /dev/null does (simgpu never opens them).
mknod "$tmp/dev/nvidia0" c 1 3 || skip_all "mknod cannot make the fake GPU device file"
set -- $(free_ports) $(free_ports)
ctld_port=$1 slurmd_port=$2 slurmd2_port=$3

mkdir -m 700 "$tmp/munge"
head -c 1024 /dev/urandom > "$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
munge_sock=$tmp/munge/munge.socket
munged -F -f --key-file="$tmp/munge/munge.key" --socket="$munge_sock" \
    --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
    --seed-file="$tmp/munge/munged.seed" >"$tmp/log/munged.out" 2>&1 &
pids="$!"
chmod 711 "$tmp/munge"

host=$(hostname -s)
cat > "$SLURM_CONF" <<CONF
ClusterName=salustest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
GresTypes=gpu,shard
PlugStackConfig=$tmp/etc/plugstack.conf
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
# Job ids apart from those of another run of this test on the machine: the
# epilog looks for a job's processes by its id in every table root can read.
FirstJobId=$(( ($$ % 600000) * 100 + 1 ))
KillWait=2
InactiveLimit=0
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 Gres=gpu:1,shard:4 State=UNKNOWN
NodeName=$node2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$slurmd2_port CPUs=8 RealMemory=4000 Gres=gpu:1,shard:4 State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES MaxTime=60 State=UP
PartitionName=all Nodes=$node,$node2 MaxTime=60 State=UP
CONF
cat > "$tmp/etc/gres.conf" <<CONF
NodeName=$node Name=gpu File=$tmp/dev/nvidia0
NodeName=$node Name=shard Count=4 File=$tmp/dev/nvidia0
NodeName=$node2 Name=gpu File=$tmp/dev/nvidia0
NodeName=$node2 Name=shard Count=4 File=$tmp/dev/nvidia0
CONF
cat > "$tmp/etc/plugstack.conf" <<CONF
required $inst/lib/spank_salus.so default=on libsalus=$inst/lib/libsalus.so salus=$inst/bin/salus group=$grp
CONF
chmod -R a+rX "$tmp/etc"

wait_until 10 "munged's socket" test -S "$munge_sock" || skip_all "munged does not start: $(tail -3 "$tmp/munge/munged.log" "$tmp/log/munged.out" 2>/dev/null | tr '\n' ' ')"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids="$pids $!"
mkdir -p "$tmp/spool/$node" "$tmp/spool/$node2"
slurmd -D -f "$SLURM_CONF" -N "$node" >"$tmp/log/slurmd.out" 2>&1 &
pids="$pids $!"
# The second node: another slurmd with a /dev/shm of its own (its tables and
# simgpu state), as a second machine has.  Its mount namespace, and the
# tmpfs, go away with it.
unshare --mount --propagation private sh -c \
    'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec slurmd -D -f "$0" -N "$1"' \
    "$SLURM_CONF" "$node2" >"$tmp/log/slurmd2.out" 2>&1 &
node2_pid=$!
pids="$pids $node2_pid"
node_idle() { [ "$(sinfo -h -n "${1:-$node}" -o %T 2>/dev/null)" = idle ]; }
slog=$tmp/log/slurmd.$node.log
# Daemons that run but do not come up fail the tests (the plugin, say, may
# keep slurmd from starting): only what the machine lacks is a skip.
if ! wait_until 30 "node $node idle" node_idle; then
    tail -n 8 "$tmp/log/slurmctld.log" "$slog" "$tmp/log/slurmd.out" 2>&1 | sed 's/^/    /'
    for t in $TESTS; do
        printf '[ RUN      ] %s\n[  FAILED  ] %s: slurmctld and slurmd did not come up (logs above)\n' "$t" "$t"
    done
    exit 1
fi
node2_up=""
if wait_until 15 "node $node2 idle" node_idle "$node2"; then
    node2_up=1
else
    node2_why="a second slurmd in a mount namespace of its own does not come up here: $(tail -n 2 "$tmp/log/slurmd2.out" | tr '\n' ' ')"
fi
say "cluster up in $(( $(date +%s) - T0 ))s"

# The node's simulated GPUs: one state for every user's jobs.
export LD_LIBRARY_PATH=$inst/sim SIMGPU_STATE=$sim SIMGPU_DEVICES=2 SIMGPU_MEMORY=16G
"$inst/bin/salus-train" --iterations 1 --kernels 1 --kernel-us 10 >/dev/null 2>&1
chmod 666 "/dev/shm$sim" || skip_all "simgpu's state was not made: $("$inst/bin/salus-train" --iterations 1 2>&1 | tail -1)"
: > "$tmp/trace.jsonl"; : > "$tmp/reports.jsonl"
chmod 666 "$tmp/trace.jsonl" "$tmp/reports.jsonl"
export SIMGPU_TRACE=$tmp/trace.jsonl
unset LD_PRELOAD SALUS_TABLE SALUS_GROUP

# ---- helpers ----------------------------------------------------------------------
failed=0
run_test() {   # <name>: runs test_<name>, prints its lines
    printf '[ RUN      ] %s\n' "$1"
    start=$(date +%s)
    "test_$1"
    rc=$?
    if [ $rc = 77 ]; then
        printf '[  SKIPPED ] %s: %s\n' "$1" "$skip_why"
    elif [ $rc = 0 ]; then
        printf '[       OK ] %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"
    else
        printf '[  FAILED  ] %s\n' "$1"
        failed=$((failed + 1))
    fi
    # What a failed scenario left running does not spill into the next.
    scancel --quiet -u "$ua" 2>/dev/null; scancel --quiet -u "$ub" 2>/dev/null
    wait_until 20 "no job left" no_jobs
}
fail() { say "FAIL: $*"; return 1; }

# as <user> <command...>
as() { u=$1; shift; runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" "$@"; }

# submit <user> <sbatch options...> -- <salus-train options...>: prints the job id
submit() {
    u=$1; shift
    opts=""
    while [ "$1" != -- ]; do opts="$opts $1"; shift; done
    shift
    as "$u" sbatch --parsable -o "$tmp/out/%j.out" -e "$tmp/out/%j.err" $opts \
        --wrap "echo CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES-unset}; exec $inst/bin/salus-train $*"
}
state_of() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
all_in() {   # <state> <job ids...>
    s=$1; shift
    for j in "$@"; do [ "$(state_of "$j")" = "$s" ] || return 1; done
}
all_done() { for j in "$@"; do case $(state_of "$j") in PENDING|RUNNING|CONFIGURING|COMPLETING|"") return 1 ;; esac; done; }
top_json() { "$inst/bin/salus-top" --once --json -t "$table" 2>/dev/null; }
# listed <job ids...>: salus-top shows a process named "<id>.batch ..." for each
listed() {
    json=$(top_json)
    for j in "$@"; do case $json in *"\"name\":\"$j.batch"*) ;; *) return 1 ;; esac; done
}
epilog_said() { grep -q "salus: job $1 $2" "$slog"; }

# analyse <script>: python over the trace, the reports and the jobs' result lines
analyse() {
    python3 - "$tmp" "$@" <<'PY'
import json, sys, os
tmp, what, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
res = {}
for j in ids:
    for line in open(os.path.join(tmp, "out", j + ".out")):
        if line.startswith("{"):
            res[j] = json.loads(line)
pid_job = {r["pid"]: j for j, r in res.items()}
ks = []
for line in open(os.path.join(tmp, "trace.jsonl")):
    k = json.loads(line)
    if k["pid"] in pid_job and k.get("kind", "kernel") == "kernel":
        ks.append(k)
ks.sort(key=lambda k: k["start_ns"])
switches = sum(1 for a, b in zip(ks, ks[1:]) if a["pid"] != b["pid"])
reps = {}
for line in open(os.path.join(tmp, "reports.jsonl")):
    r = json.loads(line)
    if r.get("pid") in pid_job:
        reps[pid_job[r["pid"]]] = r
def check(ok, msg):
    if not ok:
        print("test_slurm: FAIL: " + msg)
        sys.exit(1)
for j in ids:
    check(j in res and res[j].get("ok"), "job %s: no ok result line" % j)
check(len(ks) > 0, "no kernel of the jobs in the trace")
first = {j: min(k["start_ns"] for k in ks if pid_job[k["pid"]] == j) for j in ids}
last = {j: max(k["end_ns"] for k in ks if pid_job[k["pid"]] == j) for j in ids}
# Time-sliced: every job ran while the others were still running, in runs of
# whole iterations (far fewer switches than kernels), not interleaved kernel by kernel.
for a in ids:
    for b in ids:
        check(first[a] < last[b], "jobs %s and %s did not run at once" % (a, b))
check(2 <= switches <= len(ks) // 4, "%d switches among %d kernels" % (switches, len(ks)))
for j in ids:
    check(j in reps, "job %s wrote no report" % j)
    check(reps[j]["policy"] != "off", "job %s ran without the lease (%s)" % (j, reps[j]["policy"]))
if what == "priority":          # ids: high, middle, low priority
    check(res[ids[0]]["end_ns"] < min(res[j]["end_ns"] for j in ids[1:]),
          "the high-priority job did not finish first: %s" % {j: res[j]["end_ns"] for j in ids})
    check(reps[ids[2]]["waited_ms"] > reps[ids[0]]["waited_ms"],
          "the low-priority job waited less than the high one")
if what == "devices":
    devs = {k["device"] for k in ks}
    check(devs == {0}, "the jobs' kernels ran on devices %s, not on device 0 alone" % devs)
print("test_slurm: %d kernels, %d switches" % (len(ks), switches))
PY
}

TRAIN="--kernels 4 --kernel-us 2500 --aux-kernels 0"

# ---- the scenarios ------------------------------------------------------------------
test_three_shard_jobs() {
    hi=$(submit "$ua" -H -J hi --gres=shard:1 --salus-priority=90 --salus-report="$tmp/reports.jsonl" -- --iterations 120 $TRAIN) || return 1
    mid=$(submit "$ua" -H -J mid --gres=shard:1 --salus-priority=50 --salus-report="$tmp/reports.jsonl" -- --iterations 120 $TRAIN) || return 1
    lo=$(submit "$ua" -H -J lo --gres=shard:1 --salus-priority=10 --salus-report="$tmp/reports.jsonl" -- --iterations 120 $TRAIN) || return 1
    scontrol release "$hi,$mid,$lo" || return 1
    wait_until 20 "three jobs running" all_in RUNNING "$hi" "$mid" "$lo" || return 1
    wait_until 20 "salus-top listing jobs $hi $mid $lo" listed "$hi" "$mid" "$lo" ||
        { top_json; return 1; }
    wait_until 60 "three jobs done" all_done "$hi" "$mid" "$lo" || return 1
    for j in "$hi" "$mid" "$lo"; do
        [ "$(state_of "$j")" = COMPLETED ] || fail "job $j: $(state_of "$j")" || return 1
        grep -q "CUDA_VISIBLE_DEVICES=0" "$tmp/out/$j.out" || fail "job $j: $(head -1 "$tmp/out/$j.out")" || return 1
    done
    analyse priority "$hi" "$mid" "$lo"
}

test_bad_value_refused() {
    before=$(squeue -h -o %i | wc -l)
    err=$(as "$ua" sbatch --parsable --gres=shard:1 --salus-mem=20X --wrap true 2>&1) &&
        fail "sbatch --salus-mem=20X was accepted: $err" && return 1
    want=$("$inst/bin/salus" run --mem 20X true 2>&1 | sed -n 's/^salus run: --mem "20X" is not accepted: //p')
    [ -n "$want" ] || fail "salus run --mem 20X said nothing" || return 1
    case $err in
    *"salus: --salus-mem \"20X\" is not accepted: $want"*) ;;
    *) fail "sbatch said: $err; want salus run's: $want"; return 1 ;;
    esac
    [ "$(squeue -h -o %i | wc -l)" = "$before" ] || fail "a job was queued" || return 1
}

test_scancel_holder() {
    # Under strict priority the victim keeps the lease while the others wait.
    "$inst/bin/salus" policy priority -t "$table" >/dev/null || return 1
    victim=$(submit "$ua" -J victim --gres=shard:1 --salus-priority=90 -- --iterations 100000 $TRAIN) || return 1
    wait_until 20 "victim holding the lease" holds "$victim" || return 1
    a=$(submit "$ua" -J a --gres=shard:1 --salus-priority=10 -- --iterations 60 $TRAIN) || return 1
    b=$(submit "$ua" -J b --gres=shard:1 --salus-priority=10 -- --iterations 60 $TRAIN) || return 1
    # (A holder at rest between iterations may lend the lease for a moment:
    # wait for a sample where it holds it with the others there.)
    wait_until 20 "the victim holding the lease, the others waiting" \
        holds "$victim" "$a" "$b" || { top_json; return 1; }
    scancel "$victim" || return 1
    wait_until 60 "the others done" all_done "$victim" "$a" "$b" || return 1
    [ "$(state_of "$victim")" = CANCELLED ] || fail "victim: $(state_of "$victim")" || return 1
    for j in "$a" "$b"; do
        [ "$(state_of "$j")" = COMPLETED ] || fail "job $j: $(state_of "$j")" || return 1
    done
    for j in "$victim" "$a" "$b"; do
        wait_until 20 "epilog of $j" epilog_said "$j" "left" || return 1
        epilog_said "$j" "left nothing" ||
            fail "epilog of $j: $(grep "salus: job $j" "$slog")" || return 1
    done
    "$inst/bin/salus" policy fair -t "$table" >/dev/null
}
# holds <job> [<other jobs>...]: the job holds the lease, the others are listed
holds() {
    top_json | python3 -c 'import json,sys
d=json.load(sys.stdin)
ps=[p for dv in d["devices"] for p in dv["processes"]]
of=lambda j: [p for p in ps if p["name"].startswith(j + ".batch")]
ok=any(p["holds_lease"] for p in of(sys.argv[1])) and all(of(j) for j in sys.argv[2:])
sys.exit(0 if ok else 1)' "$@" 2>/dev/null
}

test_two_users_one_lease() {
    # The table is root's, in the group, 0660: no member can remove it or
    # change its mode.
    st=$(stat -c '%U %G %a' "/dev/shm$table")
    [ "$st" = "root $grp 660" ] || fail "table $table is $st" || return 1
    as "$ub" rm -f "/dev/shm$table" 2>/dev/null
    [ -e "/dev/shm$table" ] || fail "user $ub removed the table" || return 1
    as "$ub" chmod 666 "/dev/shm$table" 2>/dev/null && fail "user $ub changed its mode" && return 1
    a=$(submit "$ua" -H -J usera --gres=shard:1 --salus-report="$tmp/reports.jsonl" -- --iterations 80 $TRAIN) || return 1
    # The other user's job sees the GPUs in the other order: ordinal 1 is GPU 0.
    b=$(as "$ub" sbatch --parsable -H -J userb --gres=shard:1 --salus-report="$tmp/reports.jsonl" \
        -o "$tmp/out/%j.out" -e "$tmp/out/%j.err" --wrap "echo CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES; \
CUDA_VISIBLE_DEVICES=1,\$CUDA_VISIBLE_DEVICES exec $inst/bin/salus-train --device 1 --iterations 80 $TRAIN") || return 1
    scontrol release "$a,$b" || return 1
    wait_until 20 "both users' jobs in one table" listed "$a" "$b" || return 1
    json=$(top_json)
    n=$(printf '%s' "$json" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["devices"]))')
    [ "$n" = 1 ] || fail "the table has $n devices: $json" || return 1
    wait_until 60 "both done" all_done "$a" "$b" || return 1
    for j in "$a" "$b"; do
        [ "$(state_of "$j")" = COMPLETED ] || fail "job $j: $(state_of "$j")" || return 1
    done
    analyse devices "$a" "$b"
}

test_array_two_nodes() {
    [ -n "$node2_up" ] || { skip_why=$node2_why; return 77; }
    arr=$(submit "$ua" -p all --array=0-1 -J arr --gres=shard:4 -- --iterations 300 $TRAIN) || return 1
    t0=${arr}_0 t1=${arr}_1
    wait_until 20 "both tasks running" all_in RUNNING "$t0" "$t1" || return 1
    n0=$(squeue -h -j "$t0" -o %N) n1=$(squeue -h -j "$t1" -o %N)
    [ "$n0" != "$n1" ] || fail "both tasks on $n0" || return 1
    # Each node's table lists its own task, named <array>_<task>.batch.
    for t in 0 1; do
        if [ "$(squeue -h -j "${arr}_$t" -o %N)" = "$node" ]; then
            wait_until 20 "task $t in $node's table" on_node "" "${arr}_$t" "${arr}_$((1 - t))" || return 1
        else
            wait_until 20 "task $t in $node2's table" on_node "$node2_pid" "${arr}_$t" "${arr}_$((1 - t))" || return 1
        fi
    done
    wait_until 60 "both tasks done" all_done "$t0" "$t1" || return 1
    for j in "$t0" "$t1"; do
        [ "$(state_of "$j")" = COMPLETED ] || fail "task $j: $(state_of "$j")" || return 1
    done
    # The epilog of the first node's task looked for it by its array name.
    t=$([ "$n0" = "$node" ] && echo "$t0" || echo "$t1")
    id=$(scontrol show job "$t" | sed -n 's/^JobId=\([0-9]*\).*/\1/p')
    wait_until 20 "epilog of $t" epilog_said "$id" "left nothing" || return 1
}
# limit_of <job>: the memory limit salus-top shows for the job's process, in
# bytes, and its device's budget: "<limit> <budget>"
limit_of() {
    top_json | python3 -c 'import json,sys
d=json.load(sys.stdin)
for dv in d["devices"]:
    for p in dv["processes"]:
        if p["name"].startswith(sys.argv[1] + ".batch"):
            print(p["mem_limit_bytes"], dv["mem_budget_bytes"]); sys.exit(0)
sys.exit(1)' "$1" 2>/dev/null
}

test_shard_limit() {
    half=$(submit "$ua" -J half --gres=shard:2 -- --iterations 100000 $TRAIN) || return 1
    quarter=$(submit "$ua" -J quarter --gres=shard:1 -- --iterations 100000 $TRAIN) || return 1
    own=$(submit "$ua" -J own --gres=shard:1 --salus-mem=1G -- --iterations 100000 $TRAIN) || return 1
    wait_until 20 "the three jobs listed" listed "$half" "$quarter" "$own" || { top_json; return 1; }
    for j in "$half:2" "$quarter:4" "$own:0"; do
        id=${j%:*} div=${j#*:}
        set -- $(limit_of "$id")
        [ $# = 2 ] || fail "job $id: no limit shown: $(top_json)" || return 1
        if [ "$div" = 0 ]; then
            want=1073741824
        else
            want=$(( $2 / div ))
        fi
        # (the percentage of the budget is rounded down to a whole byte)
        [ $(( $1 - want )) -le 1 ] && [ $(( want - $1 )) -le 1 ] ||
            fail "job $id: limit $1 of budget $2, want $want" || return 1
    done
    scancel "$half" "$quarter" "$own"
    wait_until 30 "the three cancelled" all_done "$half" "$quarter" "$own" || return 1
}

# on_node <slurmd pid, "" for the first node> <task listed> <task not listed>
on_node() {
    if [ -n "$1" ]; then
        json=$(nsenter -t "$1" -m "$inst/bin/salus-top" --once --json -t "$table" 2>/dev/null)
    else
        json=$(top_json)
    fi
    case $json in *"\"name\":\"$2.batch"*) ;; *) return 1 ;; esac
    case $json in *"\"name\":\"$3.batch"*) return 1 ;; esac
}

for t in $TESTS; do run_test "$t"; done
printf '[==========] %d test(s) run.\n' 5
say "took $(( $(date +%s) - T0 ))s"
if [ "$failed" -gt 0 ]; then
    for f in slurmctld.log slurmd.$node.log slurmd.$node2.log; do
        echo "---- $f (last lines)"; tail -n 15 "$tmp/log/$f"
    done
    for f in "$tmp"/out/*.err; do [ -s "$f" ] && { echo "---- $f"; tail -n 5 "$f"; }; done
fi
exit 0
