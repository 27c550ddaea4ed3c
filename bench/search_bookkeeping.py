"""Server bookkeeping cost of one search step (next_step + expand_node), evaluation excluded.

Grows a search by running real steps with an instant fake judge and ~3 KB kernels, and times the last
`--measure` next_step + expand_node pairs before it reaches N nodes (default 10,000, the largest budget),
minus the judge's own time. Also
times a cold next_step (a new SearchService on the same file: the tree is loaded from the database).
Target: median <= 5 ms per pair at 10,000 nodes.

    python bench/search_bookkeeping.py [--nodes 10000] [--measure 300] [--strategy adaexplore] [--out r.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from adaexplore_mcp.models import RuleRef
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge
from adaexplore_mcp.store import Store

TARGET_MS = 5.0
FILLER = "".join(f"    acc{i} = tl.load(x_ptr + offs + {i}, mask=mask)  # filler line of a realistic kernel\n"
                 for i in range(30))


class TimedJudge(FakeJudge):
    """An instant judge that also measures itself, so its cost can be taken out."""

    def __init__(self) -> None:
        super().__init__()
        self.last_s = 0.0

    def evaluate(self, task, kernel_source, timeout_s=None, progress=None):
        t0 = time.perf_counter()
        out = super().evaluate(task, kernel_source, timeout_s, progress)
        self.calls.clear()  # 10,000 kept sources would only grow the benchmark's own memory
        self.last_s = time.perf_counter() - t0
        return out


def service(path: Path, judge: TimedJudge, rules: list[RuleRef]) -> SearchService:
    """A search over `path` whose every task is a task named by its id, with `rules` in every brief."""
    store = Store(path)
    return SearchService(store, FakeEvaluator(store, judge, rules=rules, timing_available=True))


def proposal(brief, k: int) -> dict:
    rng = random.Random(k)
    verdict = rng.choice(["passed"] * 6 + ["compile_error", "mismatch", "runtime_error"])
    source = (f"import triton\nBLOCK_SIZE = {rng.choice([256, 512, 1024])}\n@triton.jit\ndef k{k}(x_ptr):\n"
              f"{FILLER}class ModelNew:\n    pass\n# fake: verdict={verdict} speedup={rng.uniform(0.3, 6):.3f}\n")
    if brief.kind == "small":
        return {"edits": [{"old": brief.parent_kernel.splitlines()[-1], "new": source.splitlines()[-1]}],
                "note": f"edit {k}"}
    return {"kernel_source": source, "note": f"new {k}"}


def step(svc: SearchService, judge: TimedJudge, sid: str, k: int) -> float:
    t0 = time.perf_counter()
    brief = svc.next_step(sid)
    svc.expand_node(sid, brief.step_id, **proposal(brief, k))
    return time.perf_counter() - t0 - judge.last_s


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bench(nodes: int, measure: int, strategy: str, directory: Path) -> dict:
    judge = TimedJudge()
    rules = [RuleRef(rule_id=f"r{i}", text="You cannot call tl.float32(...) as a function.") for i in range(10)]
    path = directory / f"bench-{strategy}.sqlite3"
    svc = service(path, judge, rules)
    sid = svc.start_search("t1", nodes, seed=0, strategy=strategy)
    t0 = time.perf_counter()
    grow = [step(svc, judge, sid, k) for k in range(nodes - measure)]
    build_s = time.perf_counter() - t0
    cold = []
    for _ in range(5):  # a restarted server: the tree is loaded from the database
        fresh = service(path, judge, rules)
        t1 = time.perf_counter()
        fresh.next_step(sid)
        cold.append(time.perf_counter() - t1)
    pairs = [step(svc, judge, sid, k) for k in range(nodes - measure, nodes)]
    tree = svc.get_search(sid)
    return {
        "strategy": strategy, "nodes": len(tree.nodes) - 1, "max_depth": max(n.depth for n in tree.nodes),
        "measured_pairs": measure, "median_ms": statistics.median(pairs) * 1e3, "p90_ms": pct(pairs, 0.9) * 1e3,
        "max_ms": max(pairs) * 1e3, "first_1000_median_ms": statistics.median(grow[:1000]) * 1e3,
        "build_s": build_s, "cold_next_step_ms": statistics.median(cold) * 1e3,
        "db_mb": path.stat().st_size / 1e6, "target_ms": TARGET_MS,
        "meets_target": statistics.median(pairs) * 1e3 <= TARGET_MS,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--measure", type=int, default=300)
    ap.add_argument("--strategy", action="append", help="repeatable; default adaexplore")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        results = [bench(args.nodes, args.measure, s, Path(d)) for s in (args.strategy or ["adaexplore"])]
    print("| strategy | nodes | max depth | median ms/pair | p90 ms | max ms | cold next_step ms | build s | DB MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['strategy']} | {r['nodes']} | {r['max_depth']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} "
              f"| {r['max_ms']:.2f} | {r['cold_next_step_ms']:.1f} | {r['build_s']:.1f} | {r['db_mb']:.1f} |")
    print(f"\ntarget: median <= {TARGET_MS} ms per next_step + expand_node pair (evaluation excluded)")
    if args.out:
        args.out.write_text(json.dumps({"results": results}, indent=2))
    return 0 if all(r["meets_target"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
