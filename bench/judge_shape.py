"""The judge's shape, as issue 40 counts it: modules, lines, import floors and import cycles of a package.

The import graph is the CI gate's (.ci/import_cycles.py: imports made at load time, `TYPE_CHECKING` blocks and
imports inside functions left out). Floors: the longest chain of such imports inside the package, each import
cycle counted as one floor (a module on floor 1 imports nothing of the package).

    python bench/judge_shape.py                            # this checkout's adaexplore_mcp/judge
    python bench/judge_shape.py --root /tmp/base --root .  # an older checkout (git archive) beside this one

Concepts: the judge's top-level modules and subpackages, a subpackage counted once (.ci/size_check.py's count,
less the package's own __init__); concept floors: the floors of the graph where each subpackage is one node
(its face adds no floor of its own).
"""

from __future__ import annotations

import argparse
import importlib.util
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def _gate():
    """.ci/import_cycles.py, loaded by path (.ci is not a package), once."""
    spec = importlib.util.spec_from_file_location("import_cycles", HERE / ".ci" / "import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def shape(root: Path, package: str) -> dict[str, int]:
    """Modules, lines, floors and cycles of `package` (dotted) in the checkout at `root`."""
    gate = _gate()
    pkg_dir = root / package.replace(".", "/")
    modules = gate.module_names(pkg_dir)
    edges = gate.graph(pkg_dir)
    floors, cycles = _layers(edges)
    top = pkg_dir.name  # the gate names modules from the package's own folder: `judge.sandbox.core`
    concepts = {_concept(m, top) for m in modules} - {top}
    return {"modules": len(modules), "lines": sum(len(p.read_text().splitlines()) for p in modules.values()),
            "floors": floors, "cycles": cycles, "concepts": len(concepts),
            "concept_floors": _layers(_collapse(edges, top))[0]}


def _layers(edges: dict[str, set[str]]) -> tuple[int, int]:
    """(floors, cycles) of an import graph: the longest chain of imports, each cycle counted as one floor."""
    components = _gate().strongly_connected(edges)
    comp_of = {m: i for i, comp in enumerate(components) for m in comp}
    down = {i: {comp_of[w] for m in comp for w in edges[m]} - {i} for i, comp in enumerate(components)}

    @lru_cache(maxsize=None)
    def floor(i: int) -> int:
        return 1 + max((floor(j) for j in down[i]), default=0)

    return max(floor(i) for i in down), sum(len(c) > 1 for c in components)


def _concept(module: str, package: str) -> str:
    """The judge's concept a module belongs to: itself, or the subpackage right under the judge that holds it."""
    rest = module[len(package) + 1:].split(".") if module != package else []
    return f"{package}.{rest[0]}" if rest else package


def _collapse(edges: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The import graph with every subpackage of the judge as one node (its face and its inside together)."""
    out: dict[str, set[str]] = {}
    for m, targets in edges.items():
        node = _concept(m, package) if m.startswith(package) else m
        out.setdefault(node, set()).update(_concept(t, package) if t.startswith(package) else t for t in targets)
    return {m: t - {m} for m, t in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", help="a checkout (repeatable); default: this one")
    ap.add_argument("--package", default="adaexplore_mcp.judge")
    args = ap.parse_args(argv)
    print("| checkout | modules | lines | import floors | import cycles | concepts | concept floors |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    for root in args.root or [str(HERE)]:
        s = shape(Path(root), args.package)
        print(f"| {root} | {s['modules']} | {s['lines']} | {s['floors']} | {s['cycles']} | {s['concepts']} | "
              f"{s['concept_floors']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
