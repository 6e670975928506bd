#!/bin/sh
# Create the Python environment of the third-party client tests (tests/clients).
#
#   mk/venv.sh <dir> <requirements>
#
# A virtual environment of Debian's python3 (python3-venv, from mk/deps.sh)
# with exactly the pinned versions of <requirements>, PyCUDA built from its
# source distribution against the toolkit's headers and linked to its stub
# libcuda (the one at run time is simgpu or the real driver).  <dir>/.ready
# is written last (make's target): an interrupted set-up leaves no .ready and
# the next make starts it again from nothing; make reruns it too when the
# requirements or this script change.  pip's own cache (~/.cache/pip) keeps
# the PyCUDA wheel it built, so a second set-up does not compile it again.
set -eu

dir=$1; req=$2
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${VENV_PYTHON:-/usr/bin/python3}

start=$(date +%s)
rm -rf "$dir"
if ! "$PY" -m venv "$dir"; then
    echo "venv: '$PY -m venv' failed: is python3-venv installed (mk/deps.sh test)?" >&2
    exit 1
fi
# PyCUDA's build finds the toolkit through CUDA_ROOT and nvcc on PATH; its
# link needs a libcuda.so, which a machine without a GPU has only as a stub.
if ! CUDA_ROOT=$CUDA_HOME PATH=$CUDA_HOME/bin:$PATH \
     LIBRARY_PATH=$CUDA_HOME/lib64/stubs${LIBRARY_PATH:+:$LIBRARY_PATH} \
     "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
         --no-binary pycuda --use-feature=no-binary-enable-wheel-cache -r "$req"; then
    echo "venv: installing $req failed (it needs PyPI and the CUDA toolkit at $CUDA_HOME)" >&2
    exit 1
fi
: >"$dir/.ready"
echo "venv: $dir ready in $(( $(date +%s) - start ))s"
