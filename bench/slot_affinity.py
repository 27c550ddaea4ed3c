"""What task affinity in the judge's worker slots saves: a campaign round's evaluations replayed through
`FairSlots` with affinity on and off, each evaluation holding its slot for its recorded time, plus a cold
worker's cost when the slot never served its task.

Why a replay: the saving is a property of the schedule (how many evaluations land on a worker without the
task's reference), which the store's rows fix: which task, how long its stages took, and that a cold worker
paid `runners` (the reference's processes) and `compile` (torch.compile of the reference). Time runs scaled
(`--scale`) on real threads, so the scheduler under test is the judge's own. What it leaves out: the GPU
timing lock (one evaluation times at a time), which the round's wall time also waits on.

    python bench/slot_affinity.py --store .campaign/D/home/adaexplore.sqlite3 --slots 9
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from adaexplore_mcp.judge.fair import FairSlots

COLD_STAGES = ("runners", "compile")


@dataclass(frozen=True)
class Job:
    task: str
    warm_s: float  # its stages less the cold worker's and the timing lock's wait


def load_round(store: Path) -> tuple[list[Job], dict[str, float]]:
    """The GPU evaluations in the order they were stored, and each task's median cold cost."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = con.execute("select task_id, result from evaluations where backend = 'cuda' order by created_at")
    jobs, cold = [], {}
    for task, result in rows:
        stages = json.loads(result).get("stages_ms") or {}
        paid = sum(stages.get(k, 0.0) for k in COLD_STAGES)
        if "compile" in stages:
            cold.setdefault(task, []).append(paid / 1000)
        busy = sum(v for k, v in stages.items() if k not in COLD_STAGES and k != "lock_wait") / 1000
        jobs.append(Job(task, busy))
    con.close()
    overall = statistics.median(c for costs in cold.values() for c in costs) if cold else 0.0
    return jobs, {t: statistics.median(cold[t]) if t in cold else overall for t in {j.task for j in jobs}}


def replay(jobs: list[Job], cold_s: dict[str, float], slots: int, affinity: bool, scale: float) -> dict:
    """Every job queued at once by one client (a campaign round), as the driver's expand calls do."""
    fair = FairSlots(range(slots), patience=None if affinity else 0)
    warm: dict[int, set[str]] = {s: set() for s in range(slots)}
    guard = threading.Lock()
    colds = [0]

    def run(job: Job) -> None:
        slot = fair.acquire("campaign", key=job.task)
        with guard:
            cold = job.task not in warm[slot]
            warm[slot].add(job.task)
            colds[0] += cold
        time.sleep((job.warm_s + (cold_s[job.task] if cold else 0.0)) * scale)
        fair.release(slot)

    threads = [threading.Thread(target=run, args=(j,), daemon=True) for j in jobs]
    started = time.monotonic()
    for t in threads:
        t.start()
        time.sleep(0.0005)  # the order the round submitted them in
    for t in threads:
        t.join()
    return {"cold": colds[0], "makespan_s": (time.monotonic() - started) / scale}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="a campaign's adaexplore.sqlite3")
    ap.add_argument("--slots", type=int, default=9, help="judge slots one client gets (workers less one)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=0.002, help="seconds of replay per recorded second")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    jobs, cold_s = load_round(args.store)
    print(f"{len(jobs)} evaluations of {len(cold_s)} tasks, {args.slots} slots; cold worker's median cost "
          f"{statistics.median(cold_s.values()):.1f} s; repeats {args.repeat}\n")
    print("| affinity | cold evaluations (median) | makespan without the timing lock, s (median) |")
    print("| --- | --- | --- |")
    table = {}
    for affinity in (False, True):
        runs = [replay(jobs, cold_s, args.slots, affinity, args.scale) for _ in range(args.repeat)]
        row = {"cold": statistics.median(r["cold"] for r in runs),
               "makespan_s": round(statistics.median(r["makespan_s"] for r in runs), 1), "runs": runs}
        table["on" if affinity else "off"] = row
        print(f"| {'on' if affinity else 'off'} | {row['cold']:.0f} | {row['makespan_s']:.0f} |")
    if args.out:
        args.out.write_text(json.dumps({"jobs": len(jobs), "slots": args.slots, "table": table}, indent=1))


if __name__ == "__main__":
    main()
