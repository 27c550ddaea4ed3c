"""Keep size visible (EXAMPLES.md): fail when a module passes 450 lines, a sign it holds two ideas.

Covers the server package and the code around it that is read as often: the benchmarks (bench/) and
the test and benchmark tools (devtools/). Task and solution files are data (KernelBench sources), not
modules, and are left out. Run from the repo root.
"""

import pathlib
import sys

LIMIT = 450
ROOTS = ("adaexplore_mcp", "bench", "devtools")
DATA_DIRS = ("adaexplore_mcp/tasks/builtin/", "adaexplore_mcp/tasks/solutions/")

too_big = []
for root in ROOTS:
    paths = sorted(pathlib.Path(root).rglob("*.py"))
    if not paths:
        print(f"{root}: no Python files found (run from the repo root)")
        sys.exit(1)
    total = 0
    for path in paths:
        lines = len(path.read_text().splitlines())
        total += lines
        if lines > LIMIT and not path.as_posix().startswith(DATA_DIRS):
            too_big.append(f"{path}: {lines} lines")
    print(f"{root}: {total} lines of Python")
if too_big:
    print(f"modules over the {LIMIT}-line limit:\n  " + "\n  ".join(too_big))
    sys.exit(1)
