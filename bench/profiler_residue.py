"""Does a process run slower after torch.profiler? Not a test; GPU host only.

    python bench/profiler_residue.py --out residue.json [--tasks layernorm,rmsnorm]

Kineto leaves CUPTI attached to a process after a profile ends (unless TEARDOWN_CUPTI=1), and every
later launch there may pay for it. The judge used to profile a candidate just before timing it. For each
built-in task with a shipped solution, in this plain process: the candidate's and the reference's
`triton.testing.do_bench` median and their host time per call (back-to-back calls, no sync), before and
after one `torch.profiler` pass over a call of each. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.tasks.format import import_file, write_module_file  # noqa: E402
from bench.judge_latency import load_pairs  # noqa: E402


def host_us(fn: Any, calls: int = 200) -> float:
    """Median over 5 rounds of the host's microseconds per call when calls go back to back."""
    import torch

    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        rounds.append((t1 - t0) * 1e6 / calls)
    return statistics.median(rounds)


def measure(fn: Any) -> dict[str, float]:
    import triton.testing

    return {"do_bench_ms": triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median"), "host_us": host_us(fn)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", default="layernorm,rmsnorm,scale_bias_gelu")
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        for i, (task, solution) in enumerate(load_pairs(args.tasks.split(","))):
            ref = import_file(*write_module_file(Path(tmp), f"residue_ref_{i}", task.source))
            cand = import_file(*write_module_file(Path(tmp), f"residue_cand_{i}", solution))
            init = ref.get_init_inputs()
            torch.manual_seed(0)
            model = ref.Model(*init).cuda()
            torch.manual_seed(0)
            model_new = cand.ModelNew(*init).cuda()
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
            sides = {"candidate": lambda: model_new(*inputs), "reference": lambda: model(*inputs)}
            before = {side: measure(fn) for side, fn in sides.items()}
            with profile(activities=[ProfilerActivity.CUDA]):
                for fn in sides.values():
                    fn()
                torch.cuda.synchronize()
            after = {side: measure(fn) for side, fn in sides.items()}
            for side in sides:
                rows.append({"task": task.name, "side": side, **{f"before_{k}": v for k, v in before[side].items()},
                             **{f"after_{k}": v for k, v in after[side].items()}})
                print(f"  {task.name} {side}: {before[side]} -> {after[side]}", flush=True)
            del model, model_new, inputs
            torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name()
    print(f"\nProfiler residue on {gpu}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}\n")
    print("| task | side | do_bench ms before | after | host us/call before | after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['task']} | {r['side']} | {r['before_do_bench_ms']:.4f} | {r['after_do_bench_ms']:.4f} "
              f"| {r['before_host_us']:.1f} | {r['after_host_us']:.1f} |")
    args.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
