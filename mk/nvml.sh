#!/bin/sh
# Fetch NVML's header (nvml.h), which the CUDA toolkit here does not ship,
# from PyPI's nvidia-nvml-dev wheel: the build checks libsalus's list of
# hooked NVML functions against it and compiles simgpu's NVML and libsalus's
# NVML hooks with it.
#
#   mk/nvml.sh <output nvml.h> <pip requirement, e.g. nvidia-nvml-dev==13.0.87>
#
# An nvml.h this machine has is taken first (below); else a throw-away
# virtual environment of Debian's python3 (python3-venv, from mk/deps.sh)
# installs the one pinned wheel (no dependencies: it holds only
# headers); its nvml.h is copied out and the environment removed.  The
# output is written last, so that an interrupted fetch leaves none and the
# next make starts again.  pip's cache (~/.cache/pip) keeps the wheel.
set -eu

out=$1; req=$2
PY=${VENV_PYTHON:-/usr/bin/python3}
tmp=$(dirname "$out")/.nvml-venv.$$
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$(dirname "$out")"
# A machine that has NVML's header already (Debian's libnvidia-ml-dev, a
# full CUDA toolkit, NVIDIA's wheels in python3) needs no network: the
# first found is used.  The pinned wheel's otherwise.
for h in /usr/include/nvml.h /usr/local/cuda/include/nvml.h /usr/local/cuda-*/include/nvml.h \
         $("$PY" -c 'import glob, site; print(" ".join(sorted(sum((glob.glob(p + "/nvidia/*/include/nvml.h") for p in site.getsitepackages()), []))))' 2>/dev/null); do
    if [ -f "$h" ]; then
        cp "$h" "$out.tmp"
        mv "$out.tmp" "$out"
        echo "nvml: $out from $h"
        exit 0
    fi
done
if ! "$PY" -m venv "$tmp"; then
    echo "nvml: '$PY -m venv' failed: is python3-venv installed (mk/deps.sh build)?" >&2
    exit 1
fi
if ! "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$req"; then
    echo "nvml: installing $req from PyPI failed (offline?): install libnvidia-ml-dev, or run make with NVML_H=<path of an nvml.h>" >&2
    exit 1
fi
h=$(find "$tmp" -name nvml.h -path '*include*' | head -n 1)
if [ -z "$h" ]; then
    echo "nvml: $req has no include/nvml.h" >&2
    exit 1
fi
cp "$h" "$out.tmp"
mv "$out.tmp" "$out"
echo "nvml: $out from $req"
