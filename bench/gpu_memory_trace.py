"""Device memory per process across a run of evaluations on one GPU: does any judge process keep what an
evaluation lent (CUDA IPC blocks a killed runner never let go of stay in the lender's limbo)?

Evaluates a correct candidate on a 64 MiB affine task N times, then (with --stash) a candidate that keeps every
input it is lent in a global list, and after each evaluation reads `nvidia-smi` per process. Prints a table;
--out writes JSON.

    python bench/gpu_memory_trace.py [--runs 12] [--stash 4] [--out trace.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from bench.judge_latency import worker_log_notes
from tests.test_judge_cases import AFFINE_TASK, GOOD, candidate, task

BIG = {"source": AFFINE_TASK.replace("N = 512", "N = 1 << 24"), "name": "affine_big"}
STASH = candidate("        KEPT.append(x)\n        return affine(x)", extra="\nKEPT = []\n")


def per_process_mib() -> dict[int, int]:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout
    rows = [line.split(",") for line in out.splitlines() if line.strip()]
    return {int(pid): int(mib) for pid, mib in rows if pid.strip().isdigit() and mib.strip().isdigit()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--stash", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as home:
        judge = Judge(Settings(home=Path(home), device="cuda"), device_indices=[0])
        judge.start(wait=True)
        import torch

        try:
            plan = [("good", GOOD)] * args.runs + [("stash", STASH)] * args.stash + [("good", GOOD)] * 2
            for i, (name, source) in enumerate(plan):
                t0 = time.perf_counter()
                ev = judge.evaluate(task(**BIG), source)
                seconds = time.perf_counter() - t0
                time.sleep(0.5)  # a killed runner's context goes back to the driver
                procs = per_process_mib()  # host pids in a container: then only the device total tells
                workers = {w.proc.pid for w in judge._pool._workers.values()}
                worker_mib = sum(m for p, m in procs.items() if p in workers)
                free, total = torch.cuda.mem_get_info()
                rows.append({"i": i, "candidate": name, "verdict": ev.verdict.value, "s": round(seconds, 2),
                             "device_used_mib": (total - free) >> 20, "worker_mib": worker_mib,
                             "total_mib": sum(procs.values()), "processes": len(procs),
                             "error": (ev.error.message[:160] if ev.error else None),
                             "warnings": [w[:120] for w in ev.warnings][:3]})
                r = rows[-1]
                print(f"{i:3} {name:6} {r['verdict']:14} {r['s']:6.2f}s  device used {r['device_used_mib']:6} MiB  "
                      f"referees {worker_mib:6} MiB  listed {r['total_mib']:6} MiB in {r['processes']} processes  "
                      f"{r['error'] or ''}", flush=True)
        finally:
            judge.close()
            notes = worker_log_notes(Path(home))
            print(f"worker log notes ({len(notes)}):", *notes, sep="\n  ")
    if args.out:
        args.out.write_text(json.dumps({"runs": rows, "worker_log_notes": notes}, indent=2))


if __name__ == "__main__":
    main()
