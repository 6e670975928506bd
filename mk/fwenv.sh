#!/bin/sh
# Create the Python environment of the framework scenarios (tests/frameworks).
#
#   mk/fwenv.sh <dir> <requirements>
#
# A virtual environment of Debian's python3 (python3-venv, from mk/deps.sh
# test) with exactly the pinned wheels of <requirements> from PyPI: PyTorch's
# CUDA 13 wheel, JAX with its CUDA 13 plugin, CuPy for CUDA 13, and their
# NVIDIA libraries (about 7 GB).  Nothing is compiled: wheels only.
#
# make runs this every time; it is reused when present: <dir>/.ready, written
# last, holds a hash of <requirements> and of this script, and a set-up whose
# hash matches is left as it is.  Any other (none, an interrupted one, other
# pins) is made anew from nothing.  The hash, not a file's date, decides,
# because several checkouts may share one environment (make FW_ENV=<dir>):
# a fresh clone's newer files must not rebuild it.
set -eu

dir=$1; req=$2
PY=${VENV_PYTHON:-/usr/bin/python3}

want=$(cat "$req" "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$dir/.ready" ] && [ "$(cat "$dir/.ready")" = "$want" ]; then
    exit 0
fi

start=$(date +%s)
echo "fwenv: making $dir from $req (about 7 GB from PyPI, minutes)"
rm -rf "$dir"
if ! "$PY" -m venv "$dir"; then
    echo "fwenv: '$PY -m venv' failed: is python3-venv installed (mk/deps.sh test)?" >&2
    exit 1
fi
if ! "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
         --only-binary :all: -r "$req"; then
    echo "fwenv: installing $req failed (it needs PyPI; see pip's message above)" >&2
    exit 1
fi
echo "$want" >"$dir/.ready"
echo "fwenv: $dir ready in $(( $(date +%s) - start ))s"
