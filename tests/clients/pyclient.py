"""What the Python clients of tests/test_clients.c share.

Each client does the same work through its own library: three allocations
(1, 2 and 4 MiB), its own view of memory read from the driver with them
held, one allocation of 128 MiB that the test's SALUS_MEM_LIMIT (64 MiB)
must refuse, launches of a kernel over the buffers, copies, a sync, and
frees.  It ends by printing one JSON line of what it did (DID), which the
test holds against libsalus's report and simgpu's trace:

  launches, allocs, frees, bytes  what it asked the driver for
  refused                         allocations the driver refused as out of memory
  view_free, view_total           cuMemGetInfo, with view_held bytes held
  kernel                          the kernel's name (a prefix: compilers mangle)
  launch_export                   the driver export its launches went through
"""
import json
import sys

MIB = 1 << 20
SIZES = (1 * MIB, 2 * MIB, 4 * MIB)
TOO_BIG = 128 * MIB
LAUNCHES = 5
FILL = 2.5


def cubin_path():
    """The workloads' cubin (salus_fill, salus_axpy, salus_spin), argv[1]."""
    if len(sys.argv) < 2:
        sys.exit("usage: %s <kernels.cubin> [mode]" % sys.argv[0])
    return sys.argv[1]


def mode(default=""):
    return sys.argv[2] if len(sys.argv) > 2 else default


def fail(what):
    """A client that cannot go on says why and exits 3 (the test shows it)."""
    print("client: " + what, file=sys.stderr)
    sys.exit(3)


def done(**did):
    print(json.dumps(did, sort_keys=True))
    sys.stdout.flush()
