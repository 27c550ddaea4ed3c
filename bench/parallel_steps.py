"""Parallel steps on one GPU: throughput with concurrent candidates, timing while others compile, and a
4-way parallel search against a 1-way one. Not a test.

    python bench/parallel_steps.py --out parallel.json [--task scale_bias_gelu] [--evals 24] [--workers 1,2,4]
                                   [--steps 12]

1. Throughput: for each workers-per-GPU setting, `--evals` evaluations of distinct correct sources (the
   shipped solutions with a tunable varied, so each one compiles), 8 in flight at once: evaluations per
   minute (goal: at least 60 on one GPU with 8 concurrent Level-2-size candidates).
2. Timing while others compile: one candidate evaluated 5 times alone, then 5 times while 7 other distinct
   candidates are evaluated beside it: median speedup and max/min of each (goal: within 2%).
3. A scripted search of `--steps` steps through the whole App: one step at a time (`expand_node(next=true)`)
   against four at a time (`next_step(count=4)`, `expand_nodes`): wall time per step.
On a machine without a GPU it runs under the interpreter (verdicts and wall times, no speedups).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from adaexplore_mcp.search.brief_batch import whole_steps  # noqa: E402
from adaexplore_mcp.search.proposer import ScriptedProposer, default_templates  # noqa: E402
from adaexplore_mcp.tasks.format import TaskSpec  # noqa: E402
from adaexplore_mcp.tasks.library import builtin_task  # noqa: E402
from bench.multi_gpu import candidates  # noqa: E402 - distinct correct sources of a task

IN_FLIGHT = 8


def _spec(name: str) -> TaskSpec:
    t = builtin_task(name)
    return TaskSpec(task_id=t.name, name=t.name, source=t.source, small_shapes=t.small_shapes)


def throughput(spec: TaskSpec, sources: list[str], workers: int, home: Path, device: str) -> dict:
    """Evaluations per minute with IN_FLIGHT at once, on a judge with `workers` workers per GPU."""
    settings = Settings(home=home, device=device, workers_per_gpu=workers, workers=workers)
    with Judge(settings) as judge:
        judge.start(wait=True)
        judge.evaluate(spec, sources[0])  # the reference loaded and first compile done outside the clock
        t0 = time.perf_counter()

        def timed(source: str) -> tuple[float, object]:
            start = time.perf_counter()
            result = judge.evaluate(spec, source)
            return time.perf_counter() - start, result

        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            pairs = list(pool.map(timed, sources))
        wall = time.perf_counter() - t0
    results = [r for _, r in pairs]
    verdicts = [r.verdict.value for r in results]
    return {"workers_per_gpu": workers, "evals": len(sources), "wall_s": round(wall, 2),
            "per_minute": round(60 * len(sources) / wall, 1), "passed": verdicts.count("passed"),
            "stages_median_ms": stage_medians([r.stages_ms for r in results]),
            "call_median_s": round(statistics.median(t for t, _ in pairs), 3)}


def stage_medians(stages: list[dict[str, float]]) -> dict[str, float]:
    """Median milliseconds of each judge stage over the evaluations, and of the time an evaluation held the
    GPU's timing lock (what bounds throughput when it is the bottleneck). Pure."""
    names = sorted({k for s in stages for k in s})
    out = {k: round(statistics.median(s.get(k, 0.0) for s in stages), 1) for k in names}
    held = [sum(s.get(k, 0.0) for k in LOCK_HELD) for s in stages]
    out["lock_held"] = round(statistics.median(held), 1) if held else 0.0
    return out


LOCK_HELD = ("timing_candidate", "profile", "timing_reference")  # stages inside the GPU lock (referee_timing.py)


def timing_under_load(spec: TaskSpec, sources: list[str], home: Path, device: str) -> dict:
    """One candidate's speedup alone and while IN_FLIGHT - 1 others are evaluated beside it."""
    fixed, others = sources[0], sources[1:IN_FLIGHT]
    with Judge(Settings(home=home, device=device)) as judge:
        judge.start(wait=True)
        judge.evaluate(spec, fixed)
        alone = [judge.evaluate(spec, fixed).speedup for _ in range(5)]
        loaded = []
        for _ in range(5):
            with ThreadPoolExecutor(IN_FLIGHT) as pool:
                background = [pool.submit(judge.evaluate, spec, s) for s in others]
                loaded.append(judge.evaluate(spec, fixed).speedup)
                for f in background:
                    f.result()
    def summary(xs: list) -> dict:
        xs = [x for x in xs if x]
        return {"speedups": xs, "median": statistics.median(xs) if xs else None,
                "spread": (max(xs) / min(xs) - 1) if xs else None}
    out = {"alone": summary(alone), "under_load": summary(loaded)}
    a, b = out["alone"]["median"], out["under_load"]["median"]
    out["median_shift"] = (b / a - 1) if a and b else None
    return out


def search_wall(task: str, steps: int, ways: int, home: Path, device: str) -> dict:
    """Wall seconds per step of a scripted search handing out `ways` steps at a time."""
    app = App(Settings(home=home, device=device))
    try:
        proposer = ScriptedProposer(default_templates(task), seed=0)
        search_id = app.search.start_search(task, steps, seed=0)
        t0 = time.perf_counter()
        brief = app.search.next_step(search_id, count=ways)
        while brief is not None and not brief.done:
            briefs = whole_steps(brief)  # each step whole: the proposer reads one brief at a time
            if ways == 1:
                brief = app.search.expand_node(search_id, brief.step_id, next=True, **proposer.propose(brief)).next_step
                continue
            items = [{"step_id": b.step_id, **proposer.propose(b)} for b in briefs]
            brief = app.search.expand_nodes(search_id, items, next=ways).next_step
        wall = time.perf_counter() - t0
        used = app.search.summary(search_id).steps_used
    finally:
        app.close()
    return {"ways": ways, "steps": used, "wall_s": round(wall, 2), "per_step_s": round(wall / max(1, used), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--task", default="scale_bias_gelu")
    ap.add_argument("--evals", type=int, default=24)
    ap.add_argument("--workers", default="1,2,4", help="workers-per-GPU settings to compare")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--parts", default="1,2,3")
    args = ap.parse_args()
    import torch
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    spec, sources = _spec(args.task), candidates(args.task, max(args.evals, IN_FLIGHT))
    home = Path(tempfile.mkdtemp(prefix="adaexplore-parallel-"))
    parts = {p.strip() for p in args.parts.split(",")}
    report: dict = {"gpu": torch.cuda.get_device_name(0) if device == "cuda" else "none (CPU interpreter)",
                    "torch": torch.__version__, "triton": triton.__version__, "task": args.task,
                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    def save(key: str, value: object) -> None:
        """Each part is written (and echoed on stderr) as it finishes: a run cut short keeps what it measured."""
        if isinstance(report.get(key), list):
            report[key].append(value)
        else:
            report[key] = value
        args.out.write_text(json.dumps(report, indent=1))
        print(f"  {key}: {json.dumps(value)[:400]}", file=sys.stderr, flush=True)

    if "1" in parts:
        report["throughput"] = []
        for w in args.workers.split(","):
            save("throughput", throughput(spec, sources[:args.evals], int(w), home / f"w{w}", device))
    if "2" in parts and device == "cuda":
        save("timing_under_load", timing_under_load(spec, sources, home / "load", device))
    if "3" in parts:
        report["search"] = []
        for ways in (1, 4):
            save("search", search_wall(args.task, args.steps, ways, home / f"s{ways}", device))
    print(f"Parallel steps on {report['gpu']}, torch {report['torch']}, triton {report['triton']}, "
          f"task {args.task}, {report['date']}\n")
    print("| measure | value | goal |\n| --- | --- | --- |")
    for row in report.get("throughput", []):
        print(f"| {row['evals']} evaluations, {IN_FLIGHT} in flight, {row['workers_per_gpu']} workers/GPU | "
              f"{row['per_minute']} per minute ({row['passed']} passed) | >= 60 per minute |")
        st = row.get("stages_median_ms") or {}
        print(f"| where one evaluation's time went, {row['workers_per_gpu']} workers/GPU (median ms) | trials "
              f"{st.get('trials')}, waiting for the GPU lock {st.get('lock_wait')}, holding it {st.get('lock_held')}, "
              f"call {row.get('call_median_s')} s | - |")
    load = report.get("timing_under_load")
    if load:
        for key in ("alone", "under_load"):
            s = load[key]
            print(f"| one candidate timed 5x {key.replace('_', ' ')} | median {s['median']:.3f}x, spread "
                  f"{s['spread']:.1%} | spread <= 2% |")
        print(f"| median shift under load | {load['median_shift']:+.1%} | within 2% |")
    for row in report.get("search", []):
        print(f"| scripted search, {row['ways']} step(s) at a time | {row['per_step_s']} s per step "
              f"({row['steps']} steps) | 4-way faster |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
