"""Keep size visible (EXAMPLES.md): fail when a module passes 450 lines, a sign it holds two ideas."""

import pathlib
import sys

LIMIT = 450
too_big = []
for path in sorted(pathlib.Path("adaexplore_mcp").rglob("*.py")):
    if "/tasks/builtin/" in str(path) or "/tasks/solutions/" in str(path):
        continue
    lines = len(path.read_text().splitlines())
    if lines > LIMIT:
        too_big.append(f"{path}: {lines} lines")
total = sum(len(p.read_text().splitlines()) for p in pathlib.Path("adaexplore_mcp").rglob("*.py"))
print(f"adaexplore_mcp: {total} lines of Python")
if too_big:
    print("modules over the limit:\n  " + "\n  ".join(too_big))
    sys.exit(1)
