"""How big is a step brief, and how many calls does a step cost? A scripted search on the fake judge.

Why: a brief is read by the model on every step; its size is the search's main token cost. This runs the
whole App (task registry with the built-in tasks and their reference sources, the skill memory with its
seed rules, the real brief) over `FakeJudge`, so nothing is evaluated and it runs on any CPU in seconds.
The scripted proposer (`adaexplore_mcp.search.proposer`) plays the assistant; the fake judge fails a
seeded share of its kernels so the briefs carry failures, as a real search's do.

Sizes are characters of the brief as JSON (`StepBrief.model_dump_json()`, what `next_step` returns).
Calls per step: one `expand_node(next=true)` (its result carries the next brief), plus the search's first
`next_step`, plus one read of the reference source when a root brief does not carry it (a client that
cannot read resources then calls get_task). The first `next_step` is counted in the total.

    python bench/brief_size.py                      # 50 steps on rmsnorm and linear_bias_relu, CPU judge
    python bench/brief_size.py --steps 20 --backend cuda --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.models import TaskProbe, TensorSpec  # noqa: E402
from adaexplore_mcp.search.fake_judge import FakeJudge  # noqa: E402
from adaexplore_mcp.search.proposer import ScriptedProposer, default_templates  # noqa: E402

DEFAULT_TASKS = ("rmsnorm", "linear_bias_relu")
FAILURES = (("compile_error", 0.12), ("mismatch", 0.08), ("runtime_error", 0.05))
PROBE = TaskProbe(ok=True, inputs=[TensorSpec(shape=[4096, 8192], dtype="float32")],
                  outputs=[TensorSpec(shape=[4096, 8192], dtype="float32")])


class BriefStats(BaseModel):
    """Brief sizes (characters of JSON) of one scripted search, and its calls per step."""

    task: str
    backend: str
    steps: int
    median: float
    p90: float
    max: int
    small_median: float
    large_median: float
    calls_per_step: float
    sizes: list[int]
    kinds: list[str]


def seeded_verdict(source: str) -> tuple[str, float | None]:
    """A fake verdict drawn from the kernel's hash: about 1 in 4 kernels fails, the rest pass."""
    u = int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    for verdict, share in FAILURES:
        if u < share:
            return verdict, None
        u -= share
    return "passed", round(0.5 + 3 * u, 3)


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))])


def measure(task: str, steps: int, seed: int = 0, backend: str = "cpu-interpreter",
            home: Path | None = None) -> BriefStats:
    """Run one scripted search of `steps` steps on a fresh App over the fake judge; the brief sizes."""
    timed = backend == "cuda"

    def rule(source: str) -> tuple[str, float | None]:
        verdict, speedup = seeded_verdict(source)
        return verdict, speedup if timed else None

    with tempfile.TemporaryDirectory() as tmp:
        app = App(Settings(home=home or Path(tmp), device="cpu"),
                  judge=FakeJudge(rule=rule, backend=backend, probe=PROBE))  # type: ignore[arg-type]
        try:
            proposer = ScriptedProposer(default_templates(task), seed=seed)
            search_id = app.search.start_search(task, steps, seed=seed)
            sizes: list[int] = []
            kinds: list[str] = []
            calls = 0
            brief = app.search.next_step(search_id)  # the one call a search pays besides its steps
            calls += 1
            while brief is not None and not brief.done:
                sizes.append(len(brief.model_dump_json()))
                kinds.append(brief.kind or "")
                if brief.parent_node_id == 0 and not getattr(brief, "reference_source", None):
                    calls += 1  # the model must fetch the reference before writing the first kernel
                # One call per step: the result carries the next brief (expand_node(next=true)).
                result = app.search.expand_node(search_id, brief.step_id, next=True, **proposer.propose(brief))
                calls += 1
                brief = result.next_step
        finally:
            app.close()

    return stats(task, backend, sizes, kinds, calls)


def _median_of(sizes: list[int], kinds: list[str], kind: str) -> float:
    chosen = [s for s, k in zip(sizes, kinds) if k == kind]
    return float(statistics.median(chosen)) if chosen else 0.0


def stats(task: str, backend: str, sizes: list[int], kinds: list[str], calls: int) -> BriefStats:
    return BriefStats(task=task, backend=backend, steps=len(sizes), median=float(statistics.median(sizes)),
                      p90=_percentile(sizes, 0.9), max=max(sizes), small_median=_median_of(sizes, kinds, "small"),
                      large_median=_median_of(sizes, kinds, "large"), calls_per_step=round(calls / len(sizes), 3),
                      sizes=sizes, kinds=kinds)


def pooled(rows: list[BriefStats]) -> BriefStats:
    """Every brief of every row as one sample (the 'all' row)."""
    calls = round(sum(r.calls_per_step * r.steps for r in rows))
    return stats("all", rows[0].backend, [x for r in rows for x in r.sizes], [k for r in rows for k in r.kinds], calls)


def table(rows: list[BriefStats]) -> str:
    head = ("| task | backend | steps | median | p90 | max | small median | large median | calls/step |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines = [f"| {r.task} | {r.backend} | {r.steps} | {r.median:.0f} | {r.p90:.0f} | {r.max} | "
             f"{r.small_median:.0f} | {r.large_median:.0f} | {r.calls_per_step} |" for r in rows]
    return "\n".join([head, *lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="cpu-interpreter", choices=["cpu-interpreter", "cuda"])
    parser.add_argument("--json", type=Path, help="write the rows (with every brief's size) here")
    args = parser.parse_args(argv)
    rows = [measure(t, args.steps, args.seed, args.backend) for t in args.tasks.split(",") if t]
    print(f"# brief sizes (characters of JSON), {args.steps}-step scripted search, seed {args.seed}, "
          f"fake judge ({args.backend}); {platform.node()} {platform.machine()}, Python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(table(rows + ([pooled(rows)] if len(rows) > 1 else [])))
    if args.json:
        args.json.write_text(json.dumps([r.model_dump() for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
