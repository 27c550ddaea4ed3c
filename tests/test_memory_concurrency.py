"""Shared and durable: several processes record failures and rules on one data dir, nothing is lost,
and a process killed mid-write leaves a consistent database."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time

from adaexplore_mcp.memory import MemoryService
from adaexplore_mcp.models import ErrorDetail, Evaluation, Verdict
from adaexplore_mcp.store import Store

WRITERS = 4
PER_WRITER = 250
MESSAGES = ["arange's range must be a power of 2", "Both operands must be same dtype. Got fp32 and fp16",
            "reshape() cannot change total number of elements in tensor"]


def _evaluation(worker: int, k: int) -> Evaluation:
    msg = MESSAGES[k % len(MESSAGES)]
    return Evaluation(task_id=f"task{worker}-{k % 7}", verdict=Verdict.compile_error, backend="cpu-interpreter",
                      error=ErrorDetail(exception="CompilationError", message=msg,
                                        excerpt=f"triton.compiler.errors.CompilationError: at {k}:4:\n"
                                                f"def k{k}(x):\n    y = x\n    ^\n{msg}"))


def _writer(db: str, worker: int, n: int, start) -> None:
    svc = MemoryService(Store(db), load_seeds=worker == 0)
    start.wait()
    for k in range(n):
        svc.record_failure(_evaluation(worker, k), f"src {k}")


def _endless_writer(db: str, acked) -> None:
    svc = MemoryService(Store(db))
    k = 0
    while True:
        svc.record_failure(_evaluation(9, k))
        acked.value += 1  # a plain shared int, no lock: SIGKILL may land anywhere, and a lock held then hangs the reader
        if k % 25 == 0:  # rules change too: add, then edit and retire in their own transactions
            clusters = svc.failure_clusters().clusters
            if clusters:
                rule = svc.add_rule(clusters[0].cluster_id, f"Always test rule {k}.")
                svc.update_rule(rule.rule_id, f"Always test rule {k}, edited.", "edit")
                svc.retire_rule(rule.rule_id, "done")
        k += 1


def test_concurrent_processes_lose_no_failure_record(tmp_path):
    db = str(tmp_path / "db.sqlite3")
    MemoryService(Store(db))
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(db, w, PER_WRITER, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(db)
    assert store.read_one("SELECT COUNT(*) AS n FROM failures")["n"] == WRITERS * PER_WRITER
    per_worker = store.read("SELECT substr(task_id, 1, 5) AS w, COUNT(*) AS n FROM failures GROUP BY w")
    assert {r["n"] for r in per_worker} == {PER_WRITER}
    assert store.read_one("SELECT COUNT(*) AS n FROM rules")["n"] == len(MemoryService(store).query_skills(limit=500).rules)


def test_a_rule_written_by_one_process_is_seen_by_another_at_once(tmp_path):
    db = tmp_path / "db.sqlite3"
    a, b = MemoryService(Store(db), load_seeds=False), MemoryService(Store(db), load_seeds=False)
    for t in ("t1", "t2", "t3"):
        a.record_failure(_evaluation(0, 0).model_copy(update={"task_id": t}))
    [cluster] = b.failure_clusters().clusters
    rule = b.add_rule(cluster.cluster_id, "Always make tl.arange ranges powers of 2.")
    assert [r.rule_id for r in a.record_failure(_evaluation(1, 0))] == [rule.rule_id]
    assert a.get_rule(rule.rule_id).count == 4


def test_a_process_killed_mid_write_leaves_the_database_consistent(tmp_path):
    db = str(tmp_path / "db.sqlite3")
    ctx = mp.get_context("spawn")
    acked = ctx.Value("i", 0, lock=False)  # one writer; the reader must never wait on a lock the kill left held
    proc = ctx.Process(target=_endless_writer, args=(db, acked))
    proc.start()
    deadline = time.monotonic() + 60
    while acked.value < 300 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    done = acked.value
    assert done >= 300

    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    count, top = raw.execute("SELECT COUNT(*), MAX(failure_id) FROM failures").fetchone()
    assert done <= count <= done + 1 and count == top  # committed whole or not at all
    orphans = raw.execute("SELECT COUNT(*) FROM rule_signatures WHERE rule_id NOT IN (SELECT rule_id FROM rules)")
    assert orphans.fetchone()[0] == 0
    no_history = raw.execute("SELECT COUNT(*) FROM rules WHERE rule_id NOT IN (SELECT rule_id FROM rule_history)")
    assert no_history.fetchone()[0] == 0
    retired_without_entry = raw.execute(
        "SELECT COUNT(*) FROM rules r WHERE status = 'retired' AND NOT EXISTS "
        "(SELECT 1 FROM rule_history h WHERE h.rule_id = r.rule_id AND h.action = 'retire')").fetchone()[0]
    assert retired_without_entry == 0
    raw.close()
    svc = MemoryService(Store(db))  # reopens and keeps going
    svc.record_failure(_evaluation(1, 1))
    assert svc.store.read_one("SELECT COUNT(*) AS n FROM failures")["n"] == count + 1
