"""The judge's shape, as issue 40 counts it: modules, lines, import floors and import cycles of a package.

Floors: the longest chain of module-level imports inside the package, each import cycle counted as one floor
(a module on floor 1 imports nothing of the package). Only top-level `import`/`from` statements count: an import
inside a function is deferred on purpose and cannot make a cycle at import time.

    python bench/judge_shape.py                          # this checkout's adaexplore_mcp.judge
    python bench/judge_shape.py --root /tmp/base --root .  # an older checkout (git archive) beside this one
"""

from __future__ import annotations

import argparse
import ast
import sys
from functools import lru_cache
from pathlib import Path


def modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package."""
    out = {}
    for path in (root / package.replace(".", "/")).rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, node: ast.stmt, known: dict[str, Path]) -> set[str]:
    """The package's modules one top-level import statement names (a `from x import y` may name module x.y)."""
    found: list[str] = []
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        subs = [f"{base}.{a.name}" for a in node.names]
        # `from . import x` with x a module needs x, not the package's __init__ (already importing)
        found = subs + ([base] if any(m not in known for m in subs) else [])
    return {m for m in found if m in known and m != name}


def shape(root: Path, package: str) -> dict[str, int]:
    mods = modules(root, package)
    edges = {m: set().union(*[imported(m, p, n, mods) for n in ast.parse(p.read_text()).body
                              if isinstance(n, (ast.Import, ast.ImportFrom))] or [set()]) for m, p in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            components.append(comp)

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in mods:
        if v not in index:
            connect(v)
    comp_of = {v: i for i, comp in enumerate(components) for v in comp}
    down = {i: {comp_of[w] for v in comp for w in edges[v]} - {i} for i, comp in enumerate(components)}

    @lru_cache(maxsize=None)
    def floor(i: int) -> int:
        return 1 + max((floor(j) for j in down[i]), default=0)

    cycles = [c for c in components if len(c) > 1]
    return {"modules": len(mods), "lines": sum(len(p.read_text().splitlines()) for p in mods.values()),
            "floors": max(floor(i) for i in down), "cycles": len(cycles)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", help="a checkout (repeatable); default: this one")
    ap.add_argument("--package", default="adaexplore_mcp.judge")
    args = ap.parse_args(argv)
    roots = args.root or [str(Path(__file__).resolve().parents[1])]
    print(f"| checkout | modules | lines | import floors | import cycles |\n| --- | --- | --- | --- | --- |")
    for r in roots:
        s = shape(Path(r), args.package)
        print(f"| {r} | {s['modules']} | {s['lines']} | {s['floors']} | {s['cycles']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
