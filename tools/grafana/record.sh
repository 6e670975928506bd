#!/bin/sh
# Record salus-top --json while three jobs share a (simulated) GPU, then draw
# the dashboard's panels from it (render.py): the README's picture.
#
#   sh tools/grafana/record.sh [OUT.png]     (from the repository root, after make)
#
# The jobs: a training job of priority 80, one of priority 50 that joins
# 10 s later, and an inference service at 20 requests/s, over simgpu, each
# with its own table and simgpu state, removed at the end; at 25 s the
# policy changes to priority.  About 45 s.
set -eu

B=${B:-build}
out=${1:-docs/img/grafana.png}
for f in "$B/bin/salus" "$B/bin/salus-top" "$B/bin/salus-train" "$B/bin/salus-infer" \
         "$B/sim/libcuda.so.1" "$B/libsalus.so"; do
    [ -e "$f" ] || { echo "record: $f is not built: run make first" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/salus-record.XXXXXX")
id=salus-record-$$
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
    rm -f "/dev/shm/$id" "/dev/shm/$id-gpu"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for v in $(env | sed -n 's/^\(SALUS_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD
LD_LIBRARY_PATH=$B/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SALUS_TABLE=/$id
SIMGPU_STATE=/$id-gpu
SIMGPU_MEMORY=16G
export LD_LIBRARY_PATH SALUS_TABLE SIMGPU_STATE SIMGPU_MEMORY

"$B/bin/salus-top" --json -d 1 -t "$SALUS_TABLE" > "$tmp/rec.jsonl" &
pids="$pids $!"
"$B/bin/salus" run --name train-a --priority 80 -- "$B/bin/salus-train" --seconds 40 \
    --kernels 10 --kernel-us 1500 --host-ms 2 --mem 3G --iter-mem 512M >/dev/null &
pids="$pids $!"
"$B/bin/salus" run --name serve --priority 50 -- "$B/bin/salus-infer" --rate 20 --seconds 40 \
    --kernels 2 --kernel-us 1000 --mem 1G >/dev/null &
pids="$pids $!"
sleep 10
"$B/bin/salus" run --name train-b --priority 50 -- "$B/bin/salus-train" --seconds 25 \
    --kernels 10 --kernel-us 1500 --host-ms 2 --mem 2G --iter-mem 256M >/dev/null &
pids="$pids $!"
sleep 15
"$B/bin/salus" policy priority -t "$SALUS_TABLE" >/dev/null
sleep 17
mkdir -p "$(dirname "$out")"
${PYTHON:-/usr/bin/python3} "$(dirname "$0")/render.py" "$tmp/rec.jsonl" "$out"
echo "record: $(wc -l < "$tmp/rec.jsonl") snapshots drawn into $out"
