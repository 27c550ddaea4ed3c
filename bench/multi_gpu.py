"""Several GPUs on one host: throughput of concurrent evaluations and agreement of timings across GPUs.

    python bench/multi_gpu.py --out multi_gpu.json [--evals 20] [--task scale_bias_gelu]

1. One judge pinned to GPU 0 only; 20 evaluations submitted at once (threads, as parallel tool calls
   would be); wall time.
2. One judge with one worker per visible GPU; the same 20 evaluations; wall time. Throughput ratio
   (target 1.8x or more on 2 GPUs), and which GPU ran each evaluation (`device_index`).
3. The same candidate timed 5 times on each GPU: median speedup per GPU, max/min across GPUs
   (target: within 3%).
The candidates are the task's shipped solution with different launch parameters, so each evaluation
compiles and times real work. Needs at least 2 GPUs for parts 2 and 3 to mean anything.
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
sys.path.insert(0, str(ROOT))

from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from adaexplore_mcp.tasks.format import TaskSpec  # noqa: E402
from adaexplore_mcp.tasks.library import builtin_task  # noqa: E402
from adaexplore_mcp.tasks.solutions import solutions  # noqa: E402


def candidates(task_name: str, count: int) -> list[str]:
    """`count` correct sources: every variant with each allowed value of its first tunable, cycled."""
    from adaexplore_mcp.tasks.solutions import set_tunable

    pool: list[str] = []
    for sol in solutions(task_name):
        for name, values in list(sol.tunables.items())[:1]:
            pool.extend(set_tunable(sol.source, name, v) for v in values)
        pool.append(sol.source)
    return [pool[i % len(pool)] for i in range(count)]


def run_batch(judge: Judge, spec: TaskSpec, sources: list[str]) -> tuple[float, list[dict]]:
    judge.start(wait=True)
    judge.evaluate(spec, sources[0])  # warm: first compile and reference load out of the measurement
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(sources)) as pool:
        results = list(pool.map(lambda s: judge.evaluate(spec, s), sources))
    wall = time.perf_counter() - t0
    return wall, [{"verdict": r.verdict.value, "gpu": r.device_index, "speedup": r.speedup} for r in results]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--evals", type=int, default=20)
    ap.add_argument("--task", default="scale_bias_gelu")
    args = ap.parse_args()
    import torch
    import triton

    gpus = torch.cuda.device_count()
    if gpus < 1:
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    task = builtin_task(args.task)
    spec = TaskSpec(task_id=task.name, name=task.name, source=task.source, small_shapes=task.small_shapes)
    sources = candidates(args.task, args.evals)
    home = Path(tempfile.mkdtemp(prefix="adaexplore-multi-"))
    report: dict = {"gpu": torch.cuda.get_device_name(0), "gpus": gpus, "torch": torch.__version__,
                    "triton": triton.__version__, "date": dt.datetime.now(dt.timezone.utc).isoformat(),
                    "task": args.task, "evals": args.evals}
    with Judge(Settings(home=home / "one", device="cuda"), device_indices=[0]) as one:
        report["one_gpu_s"], report["one_gpu"] = run_batch(one, spec, sources)
    with Judge(Settings(home=home / "all", device="cuda")) as every:
        report["all_gpus_s"], report["all_gpus"] = run_batch(every, spec, sources)
        per_gpu: dict[int, list[float]] = {}
        for index in range(gpus):
            with Judge(Settings(home=home / f"g{index}", device="cuda"), device_indices=[index]) as pinned:
                pinned.evaluate(spec, sources[0])
                per_gpu[index] = [pinned.evaluate(spec, sources[0]).speedup or 0.0 for _ in range(5)]
    medians = {i: statistics.median(v) for i, v in per_gpu.items()}
    report["throughput_ratio"] = report["one_gpu_s"] / report["all_gpus_s"]
    report["speedup_per_gpu"] = per_gpu
    report["cross_gpu_spread"] = max(medians.values()) / min(medians.values()) - 1 if medians else None
    args.out.write_text(json.dumps(report, indent=1))
    used = sorted({r["gpu"] for r in report["all_gpus"]})
    print(f"{report['gpu']} x{gpus}, torch {torch.__version__}, triton {triton.__version__}, {report['date']}\n")
    print("| measure | value | target |\n| --- | --- | --- |")
    print(f"| {args.evals} concurrent evaluations, 1 GPU | {report['one_gpu_s']:.2f} s | |")
    print(f"| {args.evals} concurrent evaluations, {gpus} GPUs (used: {used}) | {report['all_gpus_s']:.2f} s | |")
    print(f"| throughput ratio | {report['throughput_ratio']:.2f}x | >= 1.8x on 2 GPUs |")
    print(f"| same candidate, median speedup per GPU | {', '.join(f'{v:.3f}' for v in medians.values())} | |")
    spread = report["cross_gpu_spread"]
    print(f"| max/min across GPUs | {spread:.1%} | <= 3% |" if spread is not None else "| max/min | n/a | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
