"""Fail when package code reaches inside a subpackage that has one face (issue 40, item 1).

A subpackage with a face declares it as `__all__` in its `__init__.py` (judge/sandbox, judge/processes,
judge/replay, judge/frontend, judge/cluster): the rest of the package imports those names from the subpackage
itself, never a module inside it, so the inside can be rearranged without touching the outside. Tests and
benchmarks may import the inside (they test it). Every import counts, inside functions too. Run from the repo
root: `python .ci/faces.py [--root adaexplore_mcp]`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


FACED = "judge"  # the subpackages of adaexplore_mcp/judge hold one face each


def faces(root: Path) -> dict[str, set[str]]:
    """Dotted subpackage name -> the names of its face, for every subpackage of root/judge whose __init__ sets
    __all__."""
    out = {}
    for init in sorted((root / FACED).glob("*/__init__.py")):
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                name = ".".join(init.parent.relative_to(root.parent).parts)
                out[name] = set(ast.literal_eval(node.value))
    return out


def violations(root: Path) -> list[str]:
    faced = faces(root)
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        here = parts[:-1]
        me = ".".join(here if is_pkg else parts)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    start = here[: len(here) - (node.level - 1)]
                    base = ".".join(start + ([node.module] if node.module else []))
                targets = [(base, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            else:
                continue
            for module, name in targets:
                for pkg, face in faced.items():
                    if me == pkg or me.startswith(pkg + "."):
                        continue  # the subpackage's own modules use each other freely
                    inner = module.startswith(pkg + ".")
                    through_face = module == pkg and name is not None and name not in face
                    if inner or through_face:
                        what = module if inner else f"{module}.{name}"
                        found.append(f"{path}:{node.lineno}: imports {what}, inside {pkg}; use its face: "
                                     f"{', '.join(sorted(face))}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="adaexplore_mcp")
    args = ap.parse_args(argv)
    root = Path(args.root)
    found, faced = violations(root), faces(root)
    print(f"{root}: {len(faced)} subpackages with a face ({', '.join(sorted(faced))}); {len(found)} imports past a "
          "face")
    for line in found:
        print("  " + line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
