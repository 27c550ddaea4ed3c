"""One path for an evaluation: the judge's finished result, given an id and its rules, stored once.

`evaluate_kernel` and every search step go through `KernelEvaluator.evaluate`:

    judge.evaluate(spec, source)   -> a finished Evaluation (the judge marks degenerate tasks, once)
    eval_id, rules                 -> the only fields added here (the failure is recorded in the memory)
    evaluations row                -> the one stored copy; a search node links to it by eval_id

It is also the `Evaluator` a search is given (search/evaluator.py): the search asks it for task facts and
rules instead of calling back into the app. Built-in tasks are registered without running them; the first
evaluation or search of one probes it here (shapes, determinism, degeneracy) and stores the probe.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from adaexplore_mcp.errors import NotFound
from adaexplore_mcp.models import Backend, Evaluation, RuleRef, TaskInfo, TaskProbe
from adaexplore_mcp.store import Store, new_id
from adaexplore_mcp.tasks.format import TaskSpec, source_hash

if TYPE_CHECKING:
    from adaexplore_mcp.memory.service import MemoryService
    from adaexplore_mcp.tasks.registry import TaskRegistry

Progress = Callable[[float, str], None]


class JudgeLike(Protocol):
    """What the app needs of a judge: the real one runs workers; `FakeJudge` (search/fake_judge.py) runs nothing."""

    @property
    def backend(self) -> Backend: ...

    def evaluate(
        self, task: TaskSpec, kernel_source: str, timeout_s: float | None = None, progress: Progress | None = None
    ) -> Evaluation: ...

    def probe_task(self, task: TaskSpec, timeout_s: float | None = None) -> TaskProbe: ...

    def close(self) -> None: ...


def record_evaluation(tx: sqlite3.Connection, evaluation: Evaluation, kernel_source: str) -> None:
    """Store a finished evaluation (it must have its eval_id) as one row of `evaluations`."""
    if not evaluation.eval_id:
        raise ValueError("an evaluation is stored under its eval_id; this one has none")
    tx.execute(
        "INSERT INTO evaluations (eval_id, task_id, source_hash, kernel_source, verdict, speedup, backend,"
        " result, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (evaluation.eval_id, evaluation.task_id, source_hash(kernel_source), kernel_source,
         evaluation.verdict.value, evaluation.speedup, evaluation.backend, evaluation.model_dump_json(),
         time.time()),
    )


def stored_evaluation_json(store: Store, eval_id: str) -> str:
    """A stored evaluation as JSON; NotFound for an unknown id."""
    row = store.read_one("SELECT result FROM evaluations WHERE eval_id = ?", (eval_id,))
    if row is None:
        raise NotFound(f"unknown eval_id {eval_id!r}")
    return row["result"]


class KernelEvaluator:
    """Judge + failure record + stored evaluation, for the app and for its searches."""

    def __init__(self, store: Store, judge: JudgeLike, tasks: TaskRegistry, memory: MemoryService) -> None:
        self.store = store
        self.judge = judge
        self.tasks = tasks
        self.memory = memory
        self._probe_lock = threading.Lock()
        self._gpu_name: str | None = None  # gpu_name's answer once known: the card under a server does not change

    @property
    def timing_available(self) -> bool:
        return self.judge.backend == "cuda"

    def task_info(self, task_id: str) -> TaskInfo:
        """The task (probed first if it never was: starting a search is a first use)."""
        self.task_spec(task_id)
        return self.tasks.info(task_id)

    @property
    def gpu_name(self) -> str | None:
        """The GPU the latest timed evaluation ran on (None before one): a search's first brief names the
        device its kernels will be timed on, though the server process itself never touches the GPU. Read from
        the store once (a restarted server, or another process's evaluations), then kept: every brief asks."""
        if self._gpu_name is None:
            row = self.store.read_one("SELECT json_extract(result, '$.timing.gpu') AS gpu FROM evaluations"
                                      " WHERE backend = 'cuda' AND json_extract(result, '$.timing.gpu') IS NOT NULL"
                                      " ORDER BY created_at DESC LIMIT 1")
            self._gpu_name = row["gpu"] if row is not None else None
        return self._gpu_name

    def rules(self, task_id: str) -> list[RuleRef]:
        return self.memory.rules_for_brief(task_id=task_id)

    def task_rule_ids(self, task_id: str) -> list[str]:
        return self.memory.task_rule_ids(task_id)

    def task_spec(self, task_id: str) -> TaskSpec:
        """The task as the judge runs it; NotFound for an unknown id. A task registered without a probe (a
        built-in) is probed now and the probe stored, so that it is flagged degenerate like any other."""
        spec = self.tasks.spec(task_id)
        if self.tasks.is_probed(task_id):
            return spec
        with self._probe_lock:  # one probe per task in this process; another process may probe it too
            if self.tasks.is_probed(task_id):
                return self.tasks.spec(task_id)
            probe = self.judge.probe_task(spec)
            if not probe.ok:
                # Not stored: the next use tries again. The evaluation itself will say what goes wrong.
                return spec
            self.tasks.update_probe(task_id, probe)
        return self.tasks.spec(task_id)

    def evaluate(self, task_id: str, kernel_source: str, progress: Progress | None = None,
                 timeout_s: float | None = None) -> Evaluation:
        """Judge one kernel; the result carries its eval_id and rules and is stored before it is returned."""
        spec = self.task_spec(task_id)
        evaluation = self.judge.evaluate(spec, kernel_source, timeout_s=timeout_s, progress=progress)
        evaluation.eval_id = new_id("ev")
        evaluation.rules = self.memory.record_failure(evaluation, kernel_source)
        with self.store.write() as tx:
            record_evaluation(tx, evaluation, kernel_source)
        if evaluation.timing is not None and evaluation.timing.gpu:
            self._gpu_name = evaluation.timing.gpu
        return evaluation


__all__ = ["JudgeLike", "KernelEvaluator", "record_evaluation", "stored_evaluation_json"]
