#!/bin/sh
# Check, and where we may install, what the build needs on a Debian machine.
#
#   mk/deps.sh build|test|demo|bench|fuzz|slurm
#
# Each need is a file or command that proves a package is there, and the
# Debian package that provides it.  Missing packages are installed with
# apt-get when we run as root; otherwise we stop and print the exact command.
# The CUDA toolkit is not a Debian package we can install: its absence is
# reported with what to set.  A package is listed here when the build or the
# tests use it, not before.
set -eu

what=${1:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

# need <test> <package>: "test" is -h:<header>, -c:<command>, -p:<python module>
missing=""
need() {
    case "$1" in
    -h:*) f=${1#-h:}; [ -e "/usr/include/$f" ] || [ -e "/usr/local/include/$f" ] && return 0 ;;
    -c:*) command -v "${1#-c:}" >/dev/null 2>&1 && return 0 ;;
    -p:*) /usr/bin/python3 -c "import ${1#-p:}" >/dev/null 2>&1 && return 0 ;;
    -f:*) for f in ${1#-f:}; do [ -e "$f" ] && return 0; done ;;
    esac
    case " $missing " in *" $2 "*) ;; *) missing="$missing $2" ;; esac
}

need -c:python3 python3
need -c:gcc gcc
need -c:make make
need -h:gelf.h libelf-dev           # simgpu reads cubins
need -h:zstd.h libzstd-dev          # and compressed fatbin entries
need -h:ncurses.h libncurses-dev
need -h:jemalloc/jemalloc.h libjemalloc-dev   # libsalus's private allocator (mk/jemalloc.sh)
need -p:ensurepip python3-venv      # nvml.h from PyPI (mk/nvml.sh); build/venv (mk/venv.sh)
case "$what" in
test|demo|bench)
    need -h:cmocka.h libcmocka-dev
    need -c:tmux tmux
    need -c:timeout coreutils
    need -p:numba python3-numba         # Numba 0.56, one of the third-party clients
    need -c:curl curl               # scrapes salus-top --listen in test_tools_ops
    need -c:promtool prometheus     # promtool check metrics on the exporter's text
    need -c:shellcheck shellcheck   # test_gpucheck lints bench/gpu/check.sh
    ;;
esac
case "$what" in
bench) need -p:matplotlib python3-matplotlib ;;
fuzz)                                   # make fuzz: libFuzzer's runtime comes with clang's
    need -c:clang clang
    need -f:'/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a' libclang-rt-dev
    ;;
# The Slurm plugin's headers and the daemons its test runs (slurm/).
slurm)
    need -h:slurm/spank.h libslurm-dev
    need -c:slurmctld slurmctld
    need -c:slurmd slurmd
    need -c:sbatch slurm-client
    need -c:munged munge
    need -c:useradd passwd
    ;;
esac

if [ -n "$missing" ]; then
    cmd="apt-get install -y --no-install-recommends$missing"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing$missing"
        if ! { apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 ||
               { apt-get update >/dev/null 2>&1 &&
                 apt-get install -y --no-install-recommends $missing >/dev/null; }; }; then
            echo "deps: '$cmd' failed; run it by hand to see why" >&2
            exit 1
        fi
    else
        echo "deps: missing Debian packages:$missing" >&2
        echo "deps: install them with:  sudo apt-get update && sudo $cmd" >&2
        exit 1
    fi
fi

if [ ! -x "$CUDA_HOME/bin/nvcc" ] || [ ! -f "$CUDA_HOME/include/cudaTypedefs.h" ]; then
    echo "deps: no CUDA toolkit at CUDA_HOME=$CUDA_HOME (need bin/nvcc and include/cudaTypedefs.h)" >&2
    echo "deps: install the CUDA toolkit, or run make with CUDA_HOME=<its directory>" >&2
    exit 1
fi
exit 0
