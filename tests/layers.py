#!/usr/bin/env python3
"""The source tree's layers (make check): every project include names its folder, points to the including
file's own layer or a lower one, and no two modules (a .c and its .h) include each other, directly or around
a longer cycle. Layers, lowest first (src/local.mk says the same):
  base < data < comm < nn < nn/cpu < gpu < cuda < train < src/main.c
Run by make check, or by hand: tests/layers.py [SRCDIR]."""
import os
import re
import sys

LAYERS = ["src/base", "src/data", "src/comm", "src/nn", "src/nn/cpu", "src/gpu", "cuda", "src/train", "src"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(top):
    for layer in LAYERS:
        for name in sorted(os.listdir(os.path.join(top, layer))):
            if re.search(r"\.(c|h|cu)$", name):
                yield layer, name


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("abs_top_srcdir", ".")
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    problems, edges, files = [], {}, 0
    for layer, name in sources(top):
        files += 1
        path = f"{layer}/{name}"
        module = f"{layer}/{os.path.splitext(name)[0]}"
        for inc in INCLUDE.findall(open(os.path.join(top, path), encoding="utf-8").read()):
            if inc == "config.h":
                continue
            if "/" in inc:
                target = "src/" + inc
            elif os.path.exists(os.path.join(top, layer, inc)) and layer == "cuda":
                target = f"cuda/{inc}" # nvcc's own headers beside its files
            else:
                problems.append(f'{path}: #include "{inc}" does not name its folder (e.g. "base/errors.h")')
                continue
            if not os.path.exists(os.path.join(top, target)):
                problems.append(f'{path}: #include "{inc}": no {target}')
                continue
            target_layer = os.path.dirname(target)
            if rank[target_layer] > rank[layer]:
                problems.append(f'{path} ({layer}) includes {target} from the higher layer {target_layer}')
            target_module = os.path.splitext(target)[0]
            if target_module != module:
                edges.setdefault(module, set()).add(target_module)
    # Cycles among modules: a depth-first search that reports each back edge's cycle.
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                problems.append("include cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    for p in problems:
        print("FAIL:", p)
    nedges = sum(len(v) for v in edges.values())
    print(f"layers: {files} files, {nedges} include edges between modules, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
