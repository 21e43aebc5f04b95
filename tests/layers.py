#!/usr/bin/env python3
"""The source tree's layers (make check): every project include names its folder, points to the including
file's own layer or a lower one, and no two modules (a .c and its .h) include each other, directly or around
a longer cycle (X_parts.h, the insides of module X that its helper files build on, counts as X). The same
for calls, read from the built objects (nm: a symbol one object uses and another defines): no object calls
into a higher layer, no two call each other. Layers, lowest first (src/local.mk):
  base < data < comm < nn < nn/cpu < gpu, gpu/cuda < train < src/main.c
gpu/ and gpu/cuda/ are one layer in two folders (the C and the nvcc side of gpu.h): they call each other's
files, never around a cycle. MPI is called in comm/ alone (and in base/errors.c, which aborts).
Run by make check, or by hand: tests/layers.py [SRCDIR [BUILDDIR]]."""
import os
import re
import subprocess
import sys

LAYERS = ["src/base", "src/data", "src/comm", "src/nn", "src/nn/cpu", "src/gpu", "src/gpu/cuda", "src/train", "src"]
RANK = {"src/base": 0, "src/data": 1, "src/comm": 2, "src/nn": 3, "src/nn/cpu": 4, "src/gpu": 5, "src/gpu/cuda": 5,
        "src/train": 6, "src": 7}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MPI_CALL = re.compile(r"\b(MPI_[A-Z][a-z_]*|MPI_CHECK)\s*\(")
MPI_ALLOWED = ("src/comm/", "src/base/errors.")


def module_of(path):
    """A .c and its .h are one module; X_parts.h (module X's insides, for its helper files) belongs to X."""
    return re.sub(r"_parts$", "", os.path.splitext(path)[0])


def sources(top):
    for layer in LAYERS:
        for name in sorted(os.listdir(os.path.join(top, layer))):
            if re.search(r"\.(c|h|cu)$", name):
                yield layer, name


def cycles(edges, what, problems):
    """Each cycle of the graph once per back edge of a depth-first search."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                problems.append(f"{what} cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


def symbols(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def call_edges(top, build, rank, problems):
    """module -> modules whose symbols its object uses, for every object of the library and main (objects
    whose source is gone are left out)."""
    objects = []
    for layer in LAYERS:
        d = os.path.join(build, layer)
        names = sorted(os.listdir(d)) if os.path.isdir(d) else []
        objects += [f"{layer}/{n}" for n in names if n.endswith(".o") and
                    any(os.path.exists(os.path.join(top, layer, n[:-2] + e)) for e in (".c", ".cu"))]
    defined = {}
    for o in objects:
        for sym in symbols(os.path.join(build, o), "-g", "--defined-only"):
            defined.setdefault(sym, o[:-2])
    edges = {}
    for o in objects:
        module, layer = o[:-2], os.path.dirname(o)
        for sym in symbols(os.path.join(build, o), "-u"):
            target = defined.get(sym)
            if target is None or target == module:
                continue
            if rank[os.path.dirname(target)] > rank[layer]:
                problems.append(f"{o} ({layer}) uses {sym} of {target} from the higher layer")
            edges.setdefault(module, set()).add(target)
    return objects, edges


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("abs_top_srcdir", ".")
    build = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("abs_top_builddir", top)
    rank = RANK
    problems, edges, files = [], {}, 0
    for layer, name in sources(top):
        files += 1
        path = f"{layer}/{name}"
        module = module_of(f"{layer}/{name}")
        text = open(os.path.join(top, path), encoding="utf-8").read()
        code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(\\.|[^\"\\])*\"", "", text, flags=re.S)
        mpi = sorted(set(m.group(1) for m in MPI_CALL.finditer(code)))
        if mpi and not path.startswith(MPI_ALLOWED):
            problems.append(f"{path} calls MPI ({', '.join(mpi)}): only comm/ may (comm/world.h has the plain ones)")
        for inc in INCLUDE.findall(text):
            if inc == "config.h":
                continue
            if "/" in inc:
                target = "src/" + inc
            else:
                problems.append(f'{path}: #include "{inc}" does not name its folder (e.g. "base/errors.h")')
                continue
            if not os.path.exists(os.path.join(top, target)):
                problems.append(f'{path}: #include "{inc}": no {target}')
                continue
            target_layer = os.path.dirname(target)
            if rank[target_layer] > rank[layer]:
                problems.append(f'{path} ({layer}) includes {target} from the higher layer {target_layer}')
            target_module = module_of(target)
            if target_module != module:
                edges.setdefault(module, set()).add(target_module)
    cycles(edges, "include", problems)
    objects, calls = call_edges(top, build, rank, problems)
    if not objects:
        problems.append(f"no objects under {build}/src: build first (make)")
    cycles(calls, "call", problems)
    for p in problems:
        print("FAIL:", p)
    nedges = sum(len(v) for v in edges.values())
    ncalls = sum(len(v) for v in calls.values())
    print(f"layers: {files} files, {nedges} include edges between modules; {len(objects)} objects, {ncalls} call "
          f"edges; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
