#!/usr/bin/env python3
"""circles.py - no dependency loop between the files of libsalus.

    mk/circles.py [--only <module>|--only modules] <obj-dir> [<obj-dir> ...]

A file depends on another when it calls or reads a name that only the other
defines (read from the objects with nm, so a weak or hidden reference counts
as much as a plain one).  A module also depends on a module whose function
it is handed as a pointer to call later (read from the objects' code with
objdump, pointers.py's rule): a function's address taken in one module and
passed to another module's function (a setter), or stored in another
module's data, makes the receiver depend on the function's module, as a
call would.  Two checks:
  - inside a module (src/<module>/*.o), the file graph has no cycle;
  - across modules, dependencies follow the one direction the design states
    (intercept -> page -> sched / vmem -> memory -> ipc -> drv / util), so
    the module graph, pointers counted, has no cycle either.
A receiver may be a seam (pointers.py's SEAMS: a registry with an
implementation per module, a callback used during the call only) or a
pointer left to convert (PENDING): neither makes an edge, and the summary
names each pending edge.  Prints each loop found and exits 1; prints a
summary and exits 0 otherwise.  --only limits the verdict to one module's
files, or to the module graph (tests/test_layering.c runs one check per
module).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pointers  # noqa: E402


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True,
                         text=True, check=True).stdout
    defined = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVWGSu":   # global definitions
            defined.add(parts[2])
    out = subprocess.run(["nm", "--undefined-only", obj], capture_output=True,
                         text=True, check=True).stdout
    used = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, used


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(dirs, only=None):
    objs = []
    for d in dirs:
        for root, _, files in os.walk(d):
            objs += [os.path.join(root, f) for f in files if f.endswith(".o")]
    if not objs:
        print("circles: no objects under %s (build first)" % " ".join(dirs))
        return 1
    owner, uses, path_of = {}, {}, {}
    for o in objs:
        name = os.path.relpath(o[:-2], os.path.commonpath(dirs) if len(dirs) > 1 else dirs[0])
        path_of[name] = o
        defined, used = symbols(o)
        uses[name] = used
        for s in defined:
            owner.setdefault(s, set()).add(name)
    files = {}
    for f, used in uses.items():
        files[f] = {next(iter(owner[s])) for s in used
                    if s in owner and len(owner[s]) == 1 and f not in owner[s]}
    module = lambda f: f.split("/")[-2] if "/" in f else f
    bad = 0
    inside = {f: {g for g in deps if module(g) == module(f)} for f, deps in files.items()}
    for comp in cycles(inside):
        if only not in (None, module(comp[0])):
            continue
        bad += 1
        print("circles: files of %s depend on each other: %s" % (module(comp[0]), " <-> ".join(comp)))
        for f in comp:
            for g in sorted(inside[f] & set(comp)):
                why = sorted(s for s in uses[f] if owner.get(s) == {g})
                print("    %s -> %s  (%s)" % (f, g, ", ".join(why[:6])))
    mods = {}
    for f, deps in files.items():
        mods.setdefault(module(f), set()).update(module(g) for g in deps if module(g) != module(f))
    # Function pointers handed across modules: receiver -> the function's module.
    handed, pending = pointers.edges(path_of, owner, module)
    ptr_why = {}
    for (y, x), whys in handed.items():
        mods.setdefault(y, set()).add(x)
        ptr_why[(y, x)] = whys
    for comp in cycles(mods if only in (None, "modules") else {}):
        bad += 1
        print("circles: modules depend on each other: %s" % " <-> ".join(comp))
        for m in comp:
            for f in sorted(x for x in files if module(x) == m):
                for g in sorted(files[f]):
                    if module(g) in comp and module(g) != m:
                        why = sorted(s for s in uses[f] if owner.get(s) == {g})
                        print("    %s -> %s  (%s)" % (f, g, ", ".join(why[:6])))
            for (y, x), whys in sorted(ptr_why.items()):
                if y == m and x in comp:
                    print("    %s -> %s  (function pointers: %s)" % (y, x, ", ".join(whys[:6])))
    if bad:
        return 1
    print("circles: %d files in %d modules, no loop%s; %d module edges through function "
          "pointers" % (len(files), len(mods), " in " + only if only else "", len(handed)))
    for (y, x), whys in sorted(pending.items()):
        print("circles: pending (issue 25): %s -> %s through a stored pointer, not counted: %s" %
              (y, x, ", ".join(whys)))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    only = None
    if args[:1] == ["--only"] and len(args) >= 2:
        only, args = args[1], args[2:]
    sys.exit(main(args or ["build/obj/src"], only))
