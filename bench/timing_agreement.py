"""Does the judge's speedup agree with an independent harness? Not a test; GPU host only.

    python bench/timing_agreement.py --out agreement.json [--tasks a,b] [--sandbox auto|off] [--repeats 3]

For each built-in task with a shipped solution: the judge's speedup (`Judge.evaluate`, `--repeats` times)
against `triton.testing.do_bench` in this plain process (no sandbox, no IPC, no judge code: the task and
the solution imported as modules, both models built under the same seed, inputs from `get_inputs()`,
L2 flushed by do_bench before every call). Prints a table with the judge's candidate and reference
medians beside the harness's, and the ratio of the two speedups.
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


def harness(task_source: str, solution: str, tmp: Path, index: int) -> dict[str, float]:
    """Median ms of reference and candidate under do_bench (the independent harness), same inputs."""
    import torch
    import triton.testing

    ref = import_file(*write_module_file(tmp, f"agreement_ref_{index}", task_source))
    cand = import_file(*write_module_file(tmp, f"agreement_cand_{index}", solution))
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    model = ref.Model(*init).cuda()
    torch.manual_seed(0)
    model_new = cand.ModelNew(*init).cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        ref_ms = triton.testing.do_bench(lambda: model(*inputs), warmup=50, rep=300, return_mode="median")
        cand_ms = triton.testing.do_bench(lambda: model_new(*inputs), warmup=50, rep=300, return_mode="median")
    del model, model_new, inputs
    torch.cuda.empty_cache()
    return {"ref_ms": ref_ms, "cand_ms": cand_ms, "speedup": ref_ms / cand_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch
    import triton

    from adaexplore_mcp.config import Settings
    from adaexplore_mcp.judge import Judge

    pairs = load_pairs([n for n in args.tasks.split(",") if n] or None)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        judge = Judge(Settings(home=Path(tmp) / "home", sandbox=args.sandbox))
        try:
            for i, (task, src) in enumerate(pairs):
                h = harness(task.source, src, Path(tmp), i)
                evs = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    ev = judge.evaluate(task, src)
                    evs.append((time.perf_counter() - t0, ev))
                speedups = [e.speedup for _, e in evs if e.speedup]
                last = evs[-1][1]
                t = last.timing
                row = {"task": task.name, "verdict": last.verdict.value, "harness": h,
                       "judge_speedups": speedups, "judge_cand_ms": t.candidate.median_ms if t else None,
                       "judge_ref_ms": t.reference.median_ms if t else None,
                       "judge_cand_iqr_ms": t.candidate.iqr_ms if t else None,
                       "latency_s": [round(s, 3) for s, _ in evs], "warnings": last.warnings,
                       "stages_ms": last.stages_ms, "method": t.method if t else None,
                       "ratio": (statistics.median(speedups) / h["speedup"]) if speedups else None}
                rows.append(row)
                print(f"  {task.name}: harness {h['speedup']:.2f}x (ref {h['ref_ms']:.4f} cand {h['cand_ms']:.4f} ms)"
                      f" judge {[round(s, 2) for s in speedups]} (ref {row['judge_ref_ms']} cand {row['judge_cand_ms']})"
                      f" warnings {last.warnings}", file=sys.stderr, flush=True)
        finally:
            judge.close()
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "sandbox": args.sandbox, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print(f"Judge vs do_bench on {report['gpu']}, torch {report['torch']}, triton {report['triton']}, "
          f"sandbox {args.sandbox}, {report['date']}\n")
    print("| task | harness speedup | judge speedups | judge/harness | harness cand ms | judge cand ms | "
          "harness ref ms | judge ref ms |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        h = r["harness"]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"| {r['task']} | {h['speedup']:.2f} | {', '.join(f'{s:.2f}' for s in r['judge_speedups'])} | {ratio} | "
              f"{h['cand_ms']:.4f} | {r['judge_cand_ms']} | {h['ref_ms']:.4f} | {r['judge_ref_ms']} |")


if __name__ == "__main__":
    main()
