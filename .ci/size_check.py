"""Keep size visible: fail when a module passes 450 lines, a sign it holds two ideas, or when the judge holds more
concepts than .ci/judge_concepts_max.txt allows.

A concept of the judge is one of its top-level modules or one of its subpackages (a subpackage with one face,
see .ci/faces.py, may hold several files and counts once). Splitting a module in two at the top level only to
pass the line limit adds a concept and fails; moving the parts into a subpackage behind one face does not. The
ceiling only comes down: lower it when the judge loses a concept.

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
JUDGE = pathlib.Path("adaexplore_mcp/judge")
CEILING = pathlib.Path(".ci/judge_concepts_max.txt")
modules = sorted(p.stem for p in JUDGE.glob("*.py") if p.name != "__init__.py")
subpackages = sorted(p.parent.name for p in JUDGE.glob("*/__init__.py"))
concepts = len(modules) + len(subpackages)
ceiling = int(CEILING.read_text().split()[0])
print(f"judge: {concepts} concepts ({len(modules)} modules, {len(subpackages)} subpackages: "
      f"{', '.join(subpackages)}); ceiling {ceiling}")
if concepts > ceiling:
    too_big.append(f"adaexplore_mcp/judge: {concepts} concepts, over the ceiling of {ceiling} in {CEILING} "
                   "(a new idea goes into an existing subpackage or module, or replaces one)")
elif concepts < ceiling:
    print(f"  the judge has fewer concepts than the ceiling: lower {CEILING} to {concepts}")
if too_big:
    print(f"over the limits ({LIMIT} lines a module, the judge's concept ceiling):\n  " + "\n  ".join(too_big))
    sys.exit(1)
