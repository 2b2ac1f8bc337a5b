#!/usr/bin/env bash
# The dependency graph between manyfs's top-level library modules, taken
# from `crate::X` paths in code (comments and doc links are ignored), and a
# check that it has no cycle. Prints one line per module ("a -> b c"), then
# either "no cycles" (exit 0) or the modules left on a cycle (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
src=crates/manyfs/src

python3 - "$src" <<'EOF'
import os, re, sys

src = sys.argv[1]
edges = {}


def is_module(m):
    return bool(m) and (os.path.exists(os.path.join(src, m + ".rs"))
                        or os.path.isdir(os.path.join(src, m)))


for root, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(root, f)
        rel = os.path.relpath(path, src)
        top = rel.split(os.sep)[0]
        if top.endswith(".rs"):
            top = top[:-3]
        if top == "lib":
            continue
        edges.setdefault(top, set())
        with open(path) as fh:
            for line in fh:
                code = line.split("//", 1)[0]
                names = re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", code)
                # `use crate::{a, b::c}` groups
                for grp in re.findall(r"\bcrate::\{([^}]*)\}", code):
                    names += [i.strip().split("::")[0] for i in grp.split(",")]
                for m in names:
                    if m != top and is_module(m):
                        edges[top].add(m)

for k in sorted(edges):
    print(f"{k} -> {' '.join(sorted(edges[k]))}")

# Kahn's algorithm: repeatedly remove modules nothing left depends on.
remaining = {k: set(v) & set(edges) for k, v in edges.items()}
order = []
while True:
    leaves = sorted(k for k, v in remaining.items() if not v)
    if not leaves:
        break
    order.append(leaves)
    for k in leaves:
        del remaining[k]
    for v in remaining.values():
        v.difference_update(leaves)
if remaining:
    print("CYCLE among: " + " ".join(sorted(remaining)))
    for k in sorted(remaining):
        print(f"  {k} -> {' '.join(sorted(remaining[k]))}")
    sys.exit(1)
print("no cycles; layers bottom to top:")
for i, layer in enumerate(order):
    print(f"  {i}: {' '.join(layer)}")
EOF
