"""KernelBench problems, unchanged, through create_task: do they register, and with what warnings? Not a test.

    python bench/kernelbench_create.py --repo PATH [--count 14] [--seed 1] [--levels 1,2,3] [--full-size]

PATH is a KernelBench checkout (or its bare git directory). A sample of its problem files is created
through the whole App. On the CPU each gets the small_shapes `create_task` itself would suggest (unless
--full-size), as a user following the advice would. On a GPU the problems run at full size. Prints one row
per problem (created or the error, seconds, warnings, deterministic, degenerate).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.tasks.shape_advice import suggest_small_shapes  # noqa: E402


def problems(repo: Path, levels: set[str]) -> dict[str, str]:
    """Problem path -> source, from a checkout or a bare git directory."""
    wanted = lambda p: p.startswith("KernelBench/level") and p.endswith(".py") and p.split("/")[1][5:] in levels  # noqa: E731
    if (repo / "KernelBench").is_dir():
        return {str(p.relative_to(repo)): p.read_text() for p in sorted(repo.glob("KernelBench/level*/*.py"))
                if wanted(str(p.relative_to(repo)))}
    git = ["git", "--git-dir", str(repo)]
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.split()
    return {n: subprocess.run([*git, "show", f"HEAD:{n}"], capture_output=True, text=True, check=True).stdout
            for n in names if wanted(n)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--count", type=int, default=14)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--full-size", action="store_true", help="no small_shapes, even on the CPU")
    args = ap.parse_args()
    found = problems(args.repo, {lvl.strip() for lvl in args.levels.split(",")})
    names = sorted(found)
    random.Random(args.seed).shuffle(names)
    created = 0
    with tempfile.TemporaryDirectory() as home:
        app = App(Settings(home=Path(home)))
        try:
            on_cpu = app.judge.backend != "cuda"
            print(f"{len(names[:args.count])} of {len(found)} KernelBench problems, {app.judge.backend}, seed {args.seed}\n")
            print("| problem | small_shapes | result | s | warnings | deterministic | degenerate |\n"
                  "| --- | --- | --- | ---: | --- | --- | --- |")
            for name in names[:args.count]:
                source = found[name]
                shapes = suggest_small_shapes(source).small_shapes if on_cpu and not args.full_size else {}
                t0 = time.perf_counter()
                try:
                    info, _ = app.create_task(Path(name).stem, source, small_shapes=shapes or None)
                    created += 1
                    row = ("created", "; ".join(w[:90] for w in info.warnings) or "-", info.deterministic,
                           info.degenerate)
                except Exception as exc:  # noqa: BLE001 - each problem's answer is a row
                    row = (f"{type(exc).__name__}: {str(exc)[:160]}", "-", "-", "-")
                print(f"| {name.removeprefix('KernelBench/')} | {shapes or '-'} | {row[0]} | "
                      f"{time.perf_counter() - t0:.1f} | {row[1]} | {row[2]} | {row[3]} |", flush=True)
        finally:
            app.close()
    print(f"\n{created} of {min(args.count, len(names))} created")
    return 0


if __name__ == "__main__":
    sys.exit(main())
