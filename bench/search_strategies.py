"""The three strategies on the built-in tasks, same judge, same budget: best speedup per task per strategy.

The proposer is the scripted one (adaexplore_mcp/search/proposer.py, driven by devtools/scripted_search.py:
template kernels, tunable edits for small steps, template switches for large steps), so this measures the
search machinery on real evaluations, not an LLM. Run it on the GPU machine; on a CPU it runs under the
Triton interpreter (verdicts only, every correct kernel counts as 1x).

    python bench/search_strategies.py [--tasks 6] [--budget 20] [--seed 0] [--parallel 2] [--out r.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python3 bench/search_strategies.py`: devtools/ is at the repo root
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.search import STRATEGIES  # noqa: E402
from adaexplore_mcp.tasks.library import builtin_task_names  # noqa: E402
from adaexplore_mcp.tasks.solutions import solution_task_names  # noqa: E402
from devtools.scripted_search import ScriptedRunSummary, run_scripted_search  # noqa: E402

CAP = 10.0  # AdaExplore's reporting: speedups capped at 10x, a task with no correct kernel counts 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=0, help="first N built-in tasks with templates (0 = all)")
    ap.add_argument("--task", action="append", help="a task name (repeatable); overrides --tasks")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategy", action="append", choices=STRATEGIES)
    ap.add_argument("--parallel", type=int, default=0, help="searches run at once (default: judge workers)")
    ap.add_argument("--home", type=Path, help="data directory (default: a temporary one)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    names = args.task or [n for n in builtin_task_names() if n in set(solution_task_names())]
    if args.tasks and not args.task:
        names = names[: args.tasks]
    strategies = args.strategy or list(STRATEGIES)
    home = args.home or Path(tempfile.mkdtemp(prefix="adaexplore-bench-"))
    settings = Settings.from_env().with_overrides(home=home)
    app = App(settings)
    started = time.perf_counter()
    try:
        svc = app.search  # the server's own search service: the same judge, store and evaluation path
        jobs = [(name, strategy) for name in names for strategy in strategies]

        def one(job: tuple[str, str]) -> ScriptedRunSummary:
            name, strategy = job
            summary = run_scripted_search(svc, name, name, args.budget, seed=args.seed, strategy=strategy)
            print(f"  {name:24s} {strategy:22s} best={summary.best_speedup} correct={summary.correct}/"
                  f"{summary.steps} {summary.wall_s:.0f}s", file=sys.stderr, flush=True)
            return summary

        workers = args.parallel or max(1, settings.workers)
        with ThreadPoolExecutor(workers) as pool:
            summaries = list(pool.map(one, jobs))
        backend = app.judge.backend
    finally:
        app.close()

    by = {(s.task_name, s.strategy): s for s in summaries}

    def score(s: ScriptedRunSummary) -> float:
        if s.best_node_id is None:
            return 0.0
        return min(s.best_speedup if s.best_speedup is not None else 1.0, CAP)

    print(f"\nbackend: {backend}; budget {args.budget} steps; seed {args.seed}; scripted proposer\n")
    print("| task | " + " | ".join(strategies) + " |")
    print("|---|" + "---|" * len(strategies))
    for name in names:
        cells = []
        for st in strategies:
            s = by[(name, st)]
            best = "fail" if s.best_node_id is None else (
                f"{s.best_speedup:.2f}x" if s.best_speedup is not None else "ok (untimed)")
            cells.append(f"{best} ({s.correct}/{s.steps} correct)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    means = {st: statistics.mean(score(by[(n, st)]) for n in names) for st in strategies}
    print("| **mean (capped 10x, fail = 0)** | " + " | ".join(f"**{means[st]:.2f}x**" for st in strategies) + " |")
    print(f"\nwall: {time.perf_counter() - started:.0f}s")
    if args.out:
        args.out.write_text(json.dumps({
            "backend": backend, "budget": args.budget, "seed": args.seed, "tasks": names, "strategies": strategies,
            "mean_capped_speedup": means, "runs": [s.model_dump() for s in summaries],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
