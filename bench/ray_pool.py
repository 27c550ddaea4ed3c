"""Judge workers as Ray actors vs local worker processes, on a GPU host. Not a test.

    python bench/ray_pool.py --out ray_pool.json [--tasks a,b] [--repeats 3] [--address local|auto|host:port]

1. The local pool (one worker per visible GPU) evaluates each built-in task's shipped solution `repeats`
   times, one at a time; then it is closed and a Ray pool (one actor per GPU of a one-node cluster started
   here with --address local, or of the cluster named) does the same.
   Per task: median warm latency of each, the difference (the Ray overhead per evaluation; goal under
   50 ms), identical verdicts, and median speedups within 2%.
2. The Ray round trip by itself: median of 50 calls to an idle actor (an evaluation costs a `start`, a
   long-poll per progress message and the one that brings the result).
3. Concurrency: 4 evaluations per GPU submitted at once to the Ray pool; wall time and which GPU of which
   node ran each (on a multi-GPU host every GPU should appear).
Fails clearly (exit 2) without ray or without a GPU; exit 1 when a verdict differs between the pools.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
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

from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from bench.judge_latency import load_pairs  # noqa: E402

OVERHEAD_GOAL_S = 0.050
SPEEDUP_TOLERANCE = 0.02
PER_GPU_CONCURRENT = 4


def _require() -> int:
    """The number of GPUs, after checking what this script needs (exit 2 with the reason otherwise)."""
    if importlib.util.find_spec("ray") is None:
        print("bench/ray_pool.py needs ray: pip install 'adaexplore-mcp[ray]'", file=sys.stderr)
        sys.exit(2)
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print("bench/ray_pool.py needs a CUDA GPU: it compares GPU timings of the two pools", file=sys.stderr)
        sys.exit(2)
    return torch.cuda.device_count()


def _measure(judge: Judge, pairs: list, repeats: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for task, source in pairs:
        judge.evaluate(task, source)  # first evaluation: compiles, fills the reference cache
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            ev = judge.evaluate(task, source)
            runs.append((time.perf_counter() - t0, ev))
        speedups = [ev.speedup for _, ev in runs if ev.speedup is not None]
        out[task.name] = {"latency_s": statistics.median(s for s, _ in runs),
                          "verdicts": sorted({ev.verdict.value for _, ev in runs}),
                          "speedup": statistics.median(speedups) if speedups else None,
                          "gpu": runs[-1][1].timing.gpu if runs[-1][1].timing else None,
                          "node": runs[-1][1].node, "device_index": runs[-1][1].device_index}
    return out


def _round_trip_ms(judge: Judge, calls: int = 50) -> float:
    import ray

    worker = next(iter(judge._pool._workers.values()))
    worker.wait_ready()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        ray.get(worker.actor.ready.remote())
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _concurrent(judge: Judge, pairs: list, gpus: int) -> dict:
    task, source = pairs[0]
    count = PER_GPU_CONCURRENT * gpus
    t0 = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(lambda _: judge.evaluate(task, source), range(count)))
    return {"task": task.name, "evaluations": count, "wall_s": time.perf_counter() - t0,
            "verdicts": sorted({r.verdict.value for r in results}),
            "served_by": sorted({f"{r.node} gpu{r.device_index}" for r in results})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="", help="comma-separated built-in task names (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--address", default="local", help="Ray cluster: local (started here), auto, host:port")
    parser.add_argument("--require-gpu", default="", help="ADAEXPLORE_REQUIRE_GPU for the Ray pool")
    args = parser.parse_args()
    gpus = _require()
    import ray
    import torch
    import triton

    pairs = load_pairs([t for t in args.tasks.split(",") if t] or None)
    home = Path(tempfile.mkdtemp(prefix="ray-pool-bench-"))
    report: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpus": gpus,
                    "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
                    "ray": ray.__version__, "address": args.address, "repeats": args.repeats}
    with Judge(Settings(home=home / "local", workers_per_gpu=1)) as judge:
        judge.start(wait=True)
        local = _measure(judge, pairs, args.repeats)
    t0 = time.perf_counter()
    with Judge(Settings(home=home / "ray", ray_address=args.address, require_gpu=args.require_gpu)) as judge:
        judge.start(wait=True)
        report["ray_start_s"] = time.perf_counter() - t0
        report["ray_round_trip_ms"] = _round_trip_ms(judge)
        remote = _measure(judge, pairs, args.repeats)
        report["concurrent"] = _concurrent(judge, pairs, int(ray.cluster_resources().get("GPU", 0)) or gpus)
    rows, mismatched = [], 0
    for name, loc in local.items():
        rem = remote[name]
        same_verdict = loc["verdicts"] == rem["verdicts"]
        mismatched += not same_verdict
        ratio = (rem["speedup"] / loc["speedup"] - 1) if loc["speedup"] and rem["speedup"] else None
        rows.append({"task": name, "local": loc, "ray": rem, "overhead_s": rem["latency_s"] - loc["latency_s"],
                     "same_verdict": same_verdict, "speedup_diff": ratio,
                     "speedup_ok": ratio is not None and abs(ratio) <= SPEEDUP_TOLERANCE})
    report["tasks"] = rows
    overheads = [r["overhead_s"] for r in rows]
    report["median_overhead_s"] = statistics.median(overheads) if overheads else None
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"GPU {report['gpu']} x{gpus}, ray {ray.__version__}, cluster {args.address}: start {report['ray_start_s']:.1f}s, "
          f"round trip {report['ray_round_trip_ms']:.2f} ms")
    print("| task | local s | ray s | overhead ms | verdicts | speedup local | speedup ray | diff |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for r in rows:
        diff = f"{r['speedup_diff'] * 100:+.1f}%" if r["speedup_diff"] is not None else "-"
        print(f"| {r['task']} | {r['local']['latency_s']:.3f} | {r['ray']['latency_s']:.3f} | "
              f"{r['overhead_s'] * 1000:.0f} | {'same' if r['same_verdict'] else 'DIFFERENT'} "
              f"{','.join(r['ray']['verdicts'])} | {r['local']['speedup'] or '-'} | {r['ray']['speedup'] or '-'} | {diff} |")
    med = report["median_overhead_s"]
    if med is not None:
        print(f"median overhead {med * 1000:.0f} ms (goal < {OVERHEAD_GOAL_S * 1000:.0f} ms): "
              f"{'met' if med < OVERHEAD_GOAL_S else 'NOT met'}; speedups within 2%: "
              f"{sum(r['speedup_ok'] for r in rows)}/{len(rows)}")
    c = report["concurrent"]
    print(f"concurrent: {c['evaluations']} evaluations of {c['task']} in {c['wall_s']:.1f}s, verdicts {c['verdicts']}, "
          f"served by {', '.join(c['served_by'])}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
