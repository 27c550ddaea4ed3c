"""Fail on an import cycle in the package that is not in the allow-list (issue 40, item 5).

An import counts when it runs while its module is imported: `import` and `from ... import` at module level,
in a class body or under a module-level `if`/`try`/`with`. Imports inside functions and under
`if TYPE_CHECKING:` do not count. Only modules of the package are followed (`adaexplore_mcp.*`, relative
imports resolved); `from pkg import name` is an import of `pkg.name` when that is a module, else of `pkg`.

A cycle is an elementary cycle of that graph, written from its smallest module: `a -> b -> c -> a`.
The allow-list (.ci/import_cycles_allowed.txt, one cycle a line, `#` comments) holds the cycles that existed
when the gate was added; it can only shrink: a cycle not in it fails, and so does an entry that is no longer a
cycle (remove it, or run with --prune, which removes such entries and never adds one). Run from the repo root:

    python .ci/import_cycles.py [--root adaexplore_mcp] [--allowed .ci/import_cycles_allowed.txt] [--prune]
                                [--deferred]  (also lists, ungated, the cycles imports inside functions close)
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ALLOWED = Path(".ci/import_cycles_allowed.txt")
MAX_CYCLES = 10_000  # elementary cycles listed per run; past that the graph needs untangling, not a list


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` (a directory holding __init__.py), by dotted name."""
    base = root.parent
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def load_time_imports(body: list[ast.stmt], deferred: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module whose top level is `body` is imported (with `deferred`,
    also those inside functions: for information, never gated)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if deferred:
                found += load_time_imports(node.body, deferred)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += load_time_imports(node.body, deferred)
            found += load_time_imports(node.orelse, deferred)
        elif isinstance(node, ast.ClassDef):
            found += load_time_imports(node.body, deferred)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            found += load_time_imports(node.body, deferred)
            for handler in node.handlers:
                found += load_time_imports(handler.body, deferred)
            found += load_time_imports(node.orelse, deferred) + load_time_imports(node.finalbody, deferred)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            found += load_time_imports(node.body, deferred) + load_time_imports(getattr(node, "orelse", []), deferred)
    return found


def graph(root: Path, deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at load time (with `deferred`, also inside functions)."""
    modules = module_names(root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]  # the package a relative import starts from
        for node in load_time_imports(ast.parse(path.read_text(), filename=str(path)).body, deferred):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    anchor = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a name the package has not: a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    comps.append(sorted(comp))
    return comps


def cycles(edges: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Every elementary cycle, each starting at its smallest module (so each is listed once), sorted."""
    found: list[tuple[str, ...]] = []
    for comp in strongly_connected(edges):
        if len(comp) < 2:
            continue
        members = set(comp)
        for start in comp:  # cycles whose smallest module is `start`: search among modules after it
            allowed = {m for m in members if m >= start}
            path = [start]
            work = [iter(sorted(edges[start] & allowed))]
            while work:
                nxt = next(work[-1], None)
                if nxt is None:
                    work.pop()
                    path.pop()
                    continue
                if nxt == start:
                    found.append(tuple(path))
                    if len(found) > MAX_CYCLES:
                        raise SystemExit(f"more than {MAX_CYCLES} import cycles: untangle the package first")
                elif nxt not in path:
                    path.append(nxt)
                    work.append(iter(sorted(edges[nxt] & allowed)))
    return sorted(found)


def show(cycle: tuple[str, ...]) -> str:
    return " -> ".join(cycle + cycle[:1])


def read_allowed(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def check(root: Path, allowed_path: Path, prune: bool = False, out=print) -> int:
    """Print the cycles; 0 when each is allowed and each allowed one still exists, else 1."""
    found = [show(c) for c in cycles(graph(root))]
    allowed = read_allowed(allowed_path)
    new = [c for c in found if c not in allowed]
    gone = [c for c in allowed if c not in found]
    out(f"{root}: {len(found)} import cycle(s) at module level ({len(allowed)} allowed in {allowed_path})")
    for c in found:
        out(f"  {'NEW  ' if c in new else 'known'} {c}")
    if gone and prune:
        kept = [line for line in allowed_path.read_text().splitlines()
                if line.split("#", 1)[0].strip() not in gone]
        allowed_path.write_text("\n".join(kept) + "\n")
        out(f"removed {len(gone)} cycle(s) that no longer exist from {allowed_path}")
        gone = []
    for c in gone:
        out(f"  gone  {c}  (no longer a cycle: remove it from {allowed_path}, or run with --prune)")
    if new:
        out(f"{len(new)} new import cycle(s): break them (import inside the function that needs it, or move the "
            f"shared piece down a floor); the allow-list only shrinks")
    return 1 if new or gone else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("adaexplore_mcp"))
    parser.add_argument("--allowed", type=Path, default=ALLOWED)
    parser.add_argument("--prune", action="store_true", help="drop allow-list entries that are no longer cycles")
    parser.add_argument("--deferred", action="store_true",
                        help="also list the cycles that imports inside functions close (information, not gated)")
    args = parser.parse_args(argv)
    if not (args.root / "__init__.py").exists():
        print(f"{args.root}: not a package (run from the repo root)")
        return 1
    if args.deferred:
        deferred = cycles(graph(args.root, deferred=True))
        print(f"with imports inside functions: {len(deferred)} cycle(s) (not gated)")
        for c in deferred:
            print(f"  {show(c)}")
    return check(args.root, args.allowed, args.prune)


if __name__ == "__main__":
    sys.exit(main())
