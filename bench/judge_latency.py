"""Judge latency on a GPU: cold start, warm evaluation per task, timing stability. Not a test.

    python bench/judge_latency.py --out judge_latency.json [--tasks a,b] [--stability-task name]

For each (reference, known-correct candidate) pair -- the built-in tasks and their preferred
solutions -- it measures: the cold start (first evaluation after the Judge is created: worker spawn,
imports, CUDA context, first compile), the first evaluation of each task's candidate (includes its
Triton compile), the warm latency (median of 3 repeats), and the stability of the reported speedup
(the same candidate evaluated 5 times: max/min - 1). Prints a markdown table; writes JSON to --out.
Sized to finish in well under 5 minutes on an H200.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from adaexplore_mcp.tasks.format import TaskSpec  # noqa: E402

WARM_REPEATS = 3
STABILITY_RUNS = 5


def load_pairs(names: list[str] | None) -> list[tuple[TaskSpec, str]]:
    """(task, correct candidate source) for the built-in tasks that have a reference solution."""
    from adaexplore_mcp.tasks.library import builtin_tasks
    from adaexplore_mcp.tasks.solutions import reference_solution

    pairs = []
    for t in builtin_tasks():
        if names and t.name not in names:
            continue
        try:
            solution = reference_solution(t.name)
        except KeyError:
            continue
        pairs.append((TaskSpec(task_id=t.name, name=t.name, source=t.source, small_shapes=t.small_shapes), solution))
    return pairs


def timed(judge: Judge, task: TaskSpec, source: str) -> tuple[float, object]:
    t0 = time.perf_counter()
    ev = judge.evaluate(task, source)
    return time.perf_counter() - t0, ev


def run(pairs: list[tuple[TaskSpec, str]], stability_task: str | None, home: Path, sandbox: str = "auto",
        warm_repeats: int = WARM_REPEATS) -> dict:
    import torch
    import triton

    report: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "torch": torch.__version__, "triton": triton.__version__,
                    "python": platform.python_version(), "tasks": [], "warm_repeats": warm_repeats}
    t_create = time.perf_counter()
    judge = Judge(Settings(home=home, sandbox=sandbox))
    try:
        report["backend"] = judge.backend
        first_task, first_src = pairs[0]
        cold_s, ev = timed(judge, first_task, first_src)
        report["cold_start_s"] = cold_s
        report["cold_start_since_create_s"] = time.perf_counter() - t_create
        report["gpu"] = ev.timing.gpu if ev.timing else None
        try:
            _measure_tasks(judge, pairs, first_task, cold_s, ev, report)
            name = stability_task or pairs[0][0].name
            task, src = next(p for p in pairs if p[0].name == name)
            speedups = [judge.evaluate(task, src).speedup for _ in range(STABILITY_RUNS)]
            finite = [s for s in speedups if s]
            report["stability"] = {"task": name, "speedups": speedups,
                                   "spread": (max(finite) / min(finite) - 1) if finite else None}
        except KeyboardInterrupt:  # cut at the batch's time cap: keep what was measured
            report["cut_short"] = True
    finally:
        report["worker_log_notes"] = worker_log_notes(home)
        judge.close()
    warm_all = [t["warm_median_s"] for t in report["tasks"]]
    report["warm_median_all_s"] = statistics.median(warm_all) if warm_all else None
    for kind, reused in (("fresh", False), ("reused", True)):  # the reference timed for the evaluation, or reused
        xs = [w for t in report["tasks"] for w, r in zip(t["warm_s"], t["warm_reused"]) if r is reused]
        report[f"warm_median_{kind}_s"] = statistics.median(xs) if xs else None
    return report


def worker_log_notes(home: Path, limit: int = 60) -> list[str]:
    """The judge's own notes in its workers' logs (references evicted or lost: why a warm evaluation met a
    fresh reference runner and compiled its torch.compile baseline again)."""
    from adaexplore_mcp.judge.notes import read_notes

    return read_notes(home / "logs", limit)  # drops, losses, a referee replaced, a relaxed sandbox, and why


def _measure_tasks(judge: Judge, pairs: list[tuple[TaskSpec, str]], first_task: TaskSpec, cold_s: float, ev: object,
                   report: dict) -> None:
    """First and warm latency of each pair, appended to report["tasks"] as they come."""
    for task, src in pairs:
        first_s, ev = timed(judge, task, src) if task is not first_task else (cold_s, ev)
        warm = [timed(judge, task, src) for _ in range(report.get("warm_repeats", WARM_REPEATS))]
        last = warm[-1][1]
        report["tasks"].append({
            "task": task.name, "verdict": last.verdict.value, "first_s": first_s,
            "warm_median_s": statistics.median(w for w, _ in warm), "speedup": last.speedup,
            "speedup_tf32": last.speedup_tf32, "below_fp32": last.precision.below_fp32,
            "error": last.error.message if last.error else None, "warnings": last.warnings,
            "mismatch": last.mismatch.model_dump() if last.mismatch else None,
            "sandbox": last.sandbox, "lineup": last.lineup, "stages_ms": last.stages_ms, "ops_ms": last.ops_ms,
            "speedups": last.speedups.model_dump() if last.speedups else None,  # eager, TF32, compiled, % roofline
            "blocks": [w.timing.blocks for _, w in warm if w.timing],  # wall vs events per block (hidden-work checks)
            "warm_s": [round(w, 3) for w, _ in warm],
            # whether each warm evaluation reused the reference's timing (a task's 4th evaluation onwards, 3 in 4)
            "warm_reused": [bool(e.timing and e.timing.reference_timed_s_ago is not None) for _, e in warm],
        })
        print(f"  {task.name}: {last.verdict.value} first {first_s:.2f}s warm "
              f"{report['tasks'][-1]['warm_median_s']:.2f}s speedup {last.speedup}", file=sys.stderr, flush=True)


def _timing_ms(stages: dict) -> str:
    """The timing stages together (the candidate's blocks, its profile, the reference's blocks)."""
    parts = [v for k, v in stages.items() if k.startswith("timing") or k == "profile"]
    return f"{sum(parts):.1f}" if parts else "-"


def _replay_ms(stages: dict) -> str:
    """The replay's time the evaluation waited for: starting it, waiting for its answer, judging it, the kill
    (it runs beside the last trials, so its own length is not all seen)."""
    parts = [v for k, v in stages.items() if k.startswith("replay")]
    return f"{sum(parts):.1f}" if parts else "-"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def markdown(r: dict) -> str:
    lines = [f"Judge latency on {r.get('gpu')} ({r['backend']}), torch {r['torch']}, triton {r['triton']}, "
             f"Python {r['python']}, sandbox {r.get('sandbox')}, {r['date']}", "",
             f"Cold start (first evaluation after Judge creation): {r['cold_start_s']:.2f} s; "
             f"warm median over all tasks: {r['warm_median_all_s']:.2f} s (over warm evaluations that timed the "
             f"reference: {_s(r.get('warm_median_fresh_s'))}; that reused its timing: "
             f"{_s(r.get('warm_median_reused_s'))})", "",
             "| task | verdict | first eval (s) | warm median (s) | trials (ms) | replay seen (ms) | timing (ms) | speedup "
             "| speedup vs TF32 | vs torch.compile | % roofline | below fp32 | warnings |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    for t in r["tasks"]:
        stages = t.get("stages_ms") or {}
        yardsticks = t.get("speedups") or {}
        lines.append(f"| {t['task']} | {t['verdict']} | {t['first_s']:.2f} | {t['warm_median_s']:.2f} | "
                     f"{stages.get('trials', '-')} | {_replay_ms(stages)} | {_timing_ms(stages)} | "
                     f"{fmt(t['speedup'])} | {fmt(t['speedup_tf32'])} | {fmt(yardsticks.get('compiled'))} | "
                     f"{fmt(yardsticks.get('pct_roofline'))} | {t['below_fp32']} | {len(t['warnings'])} |")
    notes = r.get("worker_log_notes") or []
    lines += ["", f"Worker log notes ({len(notes)}):", *[f"- {n}" for n in notes[:20]]]
    s = r.get("stability")
    if s is None:
        lines += ["", "Stability: not measured (the run was cut short at its time cap)"]
        return "\n".join(lines)
    spread = "-" if s["spread"] is None else f"{100 * s['spread']:.1f}%"
    lines += ["", f"Stability ({s['task']}, {len(s['speedups'])} runs): speedups "
              f"{[round(x, 3) if x else x for x in s['speedups']]}, max/min spread "
              f"{spread}"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    ap.add_argument("--tasks", default="", help="comma-separated built-in task names (default: all)")
    ap.add_argument("--stability-task", default=None, help="task for the 5x stability run (default: the first)")
    ap.add_argument("--home", type=Path, default=None, help="judge data directory (default: a temp dir)")
    ap.add_argument("--sandbox", default="auto", help="runner sandbox: auto, no-pid, off (to measure its cost)")
    ap.add_argument("--warm", type=int, default=WARM_REPEATS,
                    help="warm evaluations per task (12 or more: enough that each judge process reuses the "
                         "reference's timing, see warm_median_reused_s)")
    args = ap.parse_args()
    pairs = load_pairs([n for n in args.tasks.split(",") if n] or None)
    if not pairs:
        sys.exit("no (task, solution) pairs found")
    with tempfile.TemporaryDirectory() as tmp:
        report = run(pairs, args.stability_task, args.home or Path(tmp), args.sandbox, args.warm)
    report["sandbox"] = args.sandbox
    args.out.write_text(json.dumps(report, indent=2))
    print(markdown(report))


if __name__ == "__main__":
    main()
