"""What a speedup means, on a GPU: every built-in task with its shipped solution, against the eager
reference, the TF32 reference and torch.compile, and as a share of the roofline; what profile_kernel
costs; and the evaluation latency once the compiled baseline is cached. Not a test.

    python bench/compile_roofline.py --out compile_roofline.json [--tasks a,b] [--profile-runs 5]

Per task: a first evaluation (it pays the task's torch.compile, reported as compile_s), a second one (the
compiled reference cached in the same worker: one worker per GPU here, so it is the same process), then
profile_kernel on the same candidate. Prints a markdown table; writes JSON to --out. Needs a CUDA GPU:
without one it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from adaexplore_mcp.tasks.format import TaskSpec  # noqa: E402
from bench.judge_latency import load_pairs  # noqa: E402 - the same (task, shipped solution) pairs


def _row(task: TaskSpec, first: Any, first_s: float, warm: Any, warm_s: float, profile: Any, profile_s: float,
         table: str) -> dict[str, Any]:
    timing = warm.timing
    roof = timing.roofline if timing else None
    return {
        "task": task.name, "verdict": warm.verdict.value,
        "rejected": warm.rejected.check if warm.rejected else None,
        "speedup": warm.speedup, "speedup_tf32": warm.speedup_tf32,
        "speedup_compile": timing.speedup_compile if timing else None,
        "compile_s": first.timing.compile_s if first.timing else None,
        "compile_unavailable": (timing.compile_unavailable if timing else None)
        or (first.timing.compile_unavailable if first.timing else None),
        "pct_roofline": roof.pct_roofline if roof else None, "bound": roof.bound if roof else None,
        "pct_peak_bandwidth": roof.pct_peak_bandwidth if roof else None,
        "pct_peak_flops": roof.pct_peak_flops if roof else None, "peak_basis": roof.peak_basis if roof else None,
        "roofline_unavailable": timing.roofline_unavailable if timing else None,
        "first_eval_s": first_s, "warm_eval_s": warm_s, "stages_ms": warm.stages_ms,
        "profile_s": profile_s, "profile_error": profile.error, "profile_digest_chars": len(profile.model_dump_json()),
        "profile_table_chars": len(table),
        "candidate_launches": profile.candidate.launches if profile.candidate else None,
        "candidate_gaps_us": profile.candidate.gaps_us if profile.candidate else None,
        "reference_launches": profile.reference.launches if profile.reference else None,
    }


def run(pairs: list[tuple[TaskSpec, str]], home: Path, profile_runs: int) -> dict[str, Any]:
    import torch
    import triton

    report: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "torch": torch.__version__, "triton": triton.__version__,
                              "python": platform.python_version(), "gpu": torch.cuda.get_device_name(0), "tasks": []}
    judge = Judge(Settings(home=home, device="cuda", workers_per_gpu=1), device_indices=[0])
    try:
        judge.start(wait=True)
        for task, source in pairs:
            t0 = time.perf_counter()
            first = judge.evaluate(task, source)
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            warm = judge.evaluate(task, source)
            warm_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            profile, table = judge.profile(task, source, runs=profile_runs)
            profile_s = time.perf_counter() - t0
            report["tasks"].append(_row(task, first, first_s, warm, warm_s, profile, profile_s, table))
            r = report["tasks"][-1]
            print(f"  {task.name}: {r['verdict']} speedup {r['speedup']} vs compile {r['speedup_compile']} "
                  f"roofline {r['pct_roofline']}% ({r['bound']}); first {first_s:.1f}s warm {warm_s:.2f}s "
                  f"profile {profile_s:.2f}s", file=sys.stderr, flush=True)
    finally:
        judge.close()
    return report


def markdown(r: dict[str, Any]) -> str:
    f2 = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    f1 = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    lines = [f"Speedup against eager, TF32 and torch.compile, and the roofline, on {r['gpu']}; torch {r['torch']}, "
             f"triton {r['triton']}, Python {r['python']}, {r['date']}", "",
             "| task | verdict | vs eager | vs TF32 | vs compile | compile (s) | % roofline | bound | % peak BW | "
             "% peak FLOP/s | first eval (s) | warm eval (s) | profile (s) | digest chars |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in r["tasks"]:
        verdict = t["verdict"] + (f" ({t['rejected']})" if t["rejected"] else "")
        lines.append(f"| {t['task']} | {verdict} | {f2(t['speedup'])} | {f2(t['speedup_tf32'])} | "
                     f"{f2(t['speedup_compile'])} | {f1(t['compile_s'])} | {f1(t['pct_roofline'])} | "
                     f"{t['bound'] or '-'} | {f1(t['pct_peak_bandwidth'])} | {f1(t['pct_peak_flops'])} | "
                     f"{t['first_eval_s']:.2f} | {t['warm_eval_s']:.2f} | {t['profile_s']:.2f} | "
                     f"{t['profile_digest_chars']} |")
    missing = [(t["task"], t["compile_unavailable"]) for t in r["tasks"] if t["speedup_compile"] is None]
    if missing:
        lines += ["", "No torch.compile baseline: " + "; ".join(f"{n}: {why}" for n, why in missing)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    ap.add_argument("--tasks", default="", help="comma-separated built-in task names (default: all with a solution)")
    ap.add_argument("--profile-runs", type=int, default=5, help="calls per side under the profiler (1-20)")
    ap.add_argument("--home", type=Path, default=None, help="judge data directory (default: a temp dir)")
    args = ap.parse_args()
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        print("compile_roofline.py needs a CUDA GPU (torch.compile baselines, rooflines and profiles are GPU "
              "measurements); none is visible here", file=sys.stderr)
        return 2
    pairs = load_pairs([n for n in args.tasks.split(",") if n] or None)
    if not pairs:
        print("no (task, solution) pairs found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        report = run(pairs, args.home or Path(tmp), args.profile_runs)
    args.out.write_text(json.dumps(report, indent=2))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
