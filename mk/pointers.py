"""pointers.py - which modules of libsalus hand each other function pointers
(circles.py's second kind of dependency).

    edges(path_of, owner, module) -> (handed, pending)

path_of: file name (src/<module>/<file>, no .o) -> object path; owner:
global symbol -> the set of files that define it; module: file name ->
module.  Read from each object's code and relocations (objdump -dr, -r, -t):

  - a function's address is taken where a relocation names it outside a
    call or jump (lea, a data word), or names a data object of the file
    that holds such addresses (a static table of functions);
  - it is handed to the receiver the code gives it to: the next function
    of another module called in the same straight run of code (its
    arguments are set up before the call, sometimes before a call the file
    makes inside its own module; a branch or a return ends the run), or a
    global datum of another module stored to;
  - the receiver's module then depends on the function's module (an edge
    receiver -> owner, unless they are one module).

A heuristic over the compiler's code, right for the way the tree passes
pointers (an argument built in the run of code of the call that takes it);
one built before a branch and passed after it would be missed, and one
kept across a call to another module charged to that module.

SEAMS names receivers whose pointers are no dependency: a registry that
holds one implementation per module (each calls down, the registry calls
back in the order it promises) or a callback used during the call only.
PENDING names receivers that still store a pointer where a call from the
layer above is due (issue 25): they make no edge, and circles.py names each
in its summary.
"""
import re
import subprocess

SEAMS = {
    "shm_set_hooks": "ipc calls each module's reap and repair hooks for its own area",
    "shm_set_check": "ipc calls each module's invariant check for its own area (debug)",
    "util_fork_register": "util runs each module's fork handlers in the lock order",
    "sched_sync_end": "fold is called during the call only, under the scheduler's lock",
    "drv_resolve": "the resolver is called during the call only, to fill the table",
    "pthread_create": "libc", "pthread_once": "libc", "pthread_atfork": "libc",
    "qsort": "libc", "bsearch": "libc", "atexit": "libc", "signal": "libc",
    "sigaction": "libc", "dl_iterate_phdr": "libc",
}
PENDING = {
    "sched_set_hooks": "the scheduler's moments (boundary, waiting, tenure, paged_out, "
                       "keep, blocked, tick): sched's wait loop and handoff call up",
    "mem_set_paging": "memory's waits ask page whom to ask, what could move, stuck, "
                      "and (through page) queue for the GPU, leave it, order admissions",
    "vmem_set_work_count": "vmem asks intercept how much work was released",
    "nvh_init": "nvml looks up through intercept's real dlsym (found by this check)",
}

CALL = re.compile(r"\s(call|jmp)\w*\s")
# A static function of the same section: no relocation, the assembler's
# displacement, which objdump annotates with the function's name.
LEA_LOCAL = re.compile(r"\slea\w*\s.*#\s+[0-9a-f]+ <([^>+]+)>\s*$")
STORE = re.compile(r"\smov\w*\s+%\w+,\s*(0x[0-9a-f]+)?\(%rip\)")
RELOC = re.compile(r"R_X86_64_(\w+)\s+([^\s+-]+)([+-]0x[0-9a-f]+)?")


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def table(obj):
    """Defined symbols of obj: name -> (kind F/O, section, value, size)."""
    out = {}
    for line in run("objdump", "-t", "-w", obj).splitlines():
        m = re.match(r"([0-9a-f]{16}) (.{7}) (\S+)\s+([0-9a-f]{16})\s+(?:\.hidden\s+|\.protected\s+|\.internal\s+)?(\S+)$", line)
        if not m:
            continue
        flags, sec = m.group(2), m.group(3)
        kind = "F" if "F" in flags else "O" if "O" in flags else ""
        if kind and sec != "*UND*":
            out[m.group(5)] = (kind, sec, int(m.group(1), 16), int(m.group(4), 16))
    return out


def data_funcs(obj, syms):
    """Function names held in obj's data, by (section, offset)."""
    held = {}
    sec = None
    for line in run("objdump", "-r", "-w", obj).splitlines():
        m = re.match(r"RELOCATION RECORDS FOR \[(\S+)\]:", line)
        if m:
            sec = m.group(1)
            continue
        if not sec or sec.startswith((".text", ".debug", ".eh_frame", ".note")):
            continue
        m = re.match(r"([0-9a-f]+)\s+R_X86_64_(64|PC64)\s+([^\s+-]+)([+-]0x[0-9a-f]+)?", line)
        if m:
            target = m.group(3)
            if target.startswith(".text"):       # a static function: by its offset
                target = static_at(syms, target, int(m.group(4) or "0", 16))
            held[(sec, int(m.group(1), 16))] = target
    return held


def static_at(syms, sec, off):
    """The function of this object at `off` in text section `sec` (or sec)."""
    for n, v in syms.items():
        if v[0] == "F" and v[1] == sec and v[2] == off:
            return n
    return sec


def edges(path_of, owner, module):
    funcs = set()                      # names of functions, across the objects
    tables = {}
    for f, o in path_of.items():
        t = table(o)
        tables[f] = t
        funcs.update(n for n, v in t.items() if v[0] == "F")
    handed, pending = {}, {}

    def mod_of(f, name):
        """The module defining `name`, seen from file f (its own statics)."""
        if name in tables[f] or name.startswith(".text"):
            return module(f)
        own = owner.get(name)
        return module(next(iter(own))) if own and len(own) == 1 else None

    for f, o in path_of.items():
        syms = tables[f]
        held = data_funcs(o, syms)

        def taken(name, addend):
            """Modules whose functions this reference takes the address of."""
            if name.startswith(".text"):
                name = static_at(syms, name, addend + 4)
            if name in funcs or name.startswith(".text"):
                m = mod_of(f, name)
                return [(m, name)] if m else []
            if name.startswith("."):   # a section: the object at that offset
                off = addend + 4
                objs = [(v[2], v[3]) for n, v in syms.items() if v[0] == "O" and v[1] == name and
                        v[2] <= off < v[2] + max(v[3], 1)]
                lo, size = objs[0] if objs else (off, 1)
                sec = name
            elif name in syms and syms[name][0] == "O":
                _, sec, lo, size = syms[name]
            else:
                return []
            out = []
            for (s, at), target in held.items():
                if s == sec and lo <= at < lo + size and (target in funcs or target.startswith(".text")):
                    m = mod_of(f, target)
                    if m:
                        out.append((m, target))
            return out

        pend = []
        for line in run("objdump", "-dr", "--no-show-raw-insn", "-w", o).splitlines():
            if re.match(r"[0-9a-f]+ <.*>:$", line):
                pend = []
                continue
            r = RELOC.search(line)
            call = CALL.search(line)
            if call and r and r.group(1) in ("PLT32", "PC32"):
                sink = r.group(2)
                if pend:
                    y = mod_of(f, sink)
                    for x, fn in pend:
                        if sink in SEAMS or y is None:
                            continue
                        into = pending if sink in PENDING else handed
                        if y != x and y != module(f):
                            into.setdefault((y, x), []).append("%s via %s" % (fn, sink))
                # A call inside the file's own module may only be preparing
                # the call that takes the pointer (the compiler set the
                # argument up before it): the pointer waits for the next.
                if mod_of(f, sink) != module(f) or re.search(r"\sjmp", line):
                    pend = []
                continue
            if call or re.search(r"\s(ret|j[a-z]+)\s", line + " "):   # the path ends
                pend = []
                continue
            if not r:
                m = LEA_LOCAL.search(line)
                if m and m.group(1) in syms and syms[m.group(1)][0] == "F":
                    pend.append((module(f), m.group(1)))
                continue
            if r:
                addend = int(r.group(3), 16) if r.group(3) else 0
                if STORE.search(line) and pend:
                    y = mod_of(f, r.group(2))
                    for x, fn in pend:
                        if y and y != x:
                            handed.setdefault((y, x), []).append("%s into %s" % (fn, r.group(2)))
                    continue
                pend += taken(r.group(2), addend)
    for d in (handed, pending):
        for k in d:
            d[k] = sorted(set(d[k]))
    return handed, pending
