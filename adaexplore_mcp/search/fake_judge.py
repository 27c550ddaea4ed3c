"""Fakes for tests and bookkeeping benchmarks (like httpx's MockTransport): source -> Evaluation, nothing run.

The verdict and speedup come from a comment in the source, `# fake: verdict=passed speedup=1.7`
(speedup=none for "not timed"), or from a function you pass.

- `FakeJudge` has the real judge's interface (`JudgeLike`: evaluate a TaskSpec, probe a task, backend,
  close), so an `App` runs on it end to end without worker processes.
- `FakeEvaluator` has the interface a search is given (`search.evaluator.Evaluator`) without an app: tasks
  from a function, fixed rules, and results stored in the `evaluations` table as the real evaluator does,
  so a search's nodes link to them the same way.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence

from adaexplore_mcp.errors import NotFound
from adaexplore_mcp.evaluator import Progress, record_evaluation
from adaexplore_mcp.judge.api import task_evaluation
from adaexplore_mcp.models import Backend, ErrorDetail, Evaluation, RuleRef, TaskInfo, TaskProbe, Verdict
from adaexplore_mcp.store import Store, new_id
from adaexplore_mcp.tasks.format import TaskSpec

_FAKE = re.compile(r"#\s*fake:\s*(?P<body>.*)$", re.MULTILINE)
Rule = Callable[[str], "tuple[str, float | None]"]


def fake_verdict(source: str, default: tuple[str, float | None] = ("passed", None)) -> tuple[str, float | None]:
    """(verdict, speedup) from the last `# fake:` comment of the source; `default` without one."""
    m = None
    for m in _FAKE.finditer(source):
        pass
    if m is None:
        return default
    fields = dict(kv.split("=", 1) for kv in m.group("body").split() if "=" in kv)
    speedup = fields.get("speedup", "none")
    return fields.get("verdict", "passed"), None if speedup.lower() == "none" else float(speedup)


class FakeJudge:
    """A judge that runs nothing. `rule(source)` (default: the `# fake:` comment) gives the verdict; a rule that
    raises makes `evaluate` raise, as a broken judge would. Every probe answers `probe`."""

    def __init__(self, rule: Rule | None = None, default: tuple[str, float | None] = ("passed", None),
                 backend: Backend = "cpu-interpreter", probe: TaskProbe | None = None) -> None:
        self.rule = rule
        self.default = default
        self.backend: Backend = backend
        self.probe = probe or TaskProbe(ok=True)
        self.calls: list[str] = []  # every evaluated source, in order
        self.probes: list[str] = []  # the name of every probed task, in order
        self._lock = threading.Lock()

    def verdict_of(self, source: str) -> tuple[str, float | None]:
        return self.rule(source) if self.rule is not None else fake_verdict(source, self.default)

    def evaluate(self, task: TaskSpec, kernel_source: str, timeout_s: float | None = None,
                 progress: Progress | None = None) -> Evaluation:
        started = time.monotonic()
        with self._lock:
            self.calls.append(kernel_source)
        verdict, speedup = self.verdict_of(kernel_source)
        error = None
        if verdict not in ("passed", "mismatch", "rejected"):
            error = ErrorDetail(exception="FakeError", message=f"fake {verdict}")
        small = self.backend != "cuda" and bool(task.small_shapes)
        ev = task_evaluation(task, self.backend, Verdict(verdict), small=small,
                             speedup=speedup if verdict == "passed" else None, error=error)
        ev.timing_unavailable = None if speedup is not None else "fake judge: not timed"
        ev.duration_s = time.monotonic() - started
        return ev

    def probe_task(self, task: TaskSpec, timeout_s: float | None = None) -> TaskProbe:
        with self._lock:
            self.probes.append(task.name)
        return self.probe.model_copy(deep=True)

    def close(self) -> None:
        pass


def _any_task(task_id: str) -> TaskInfo:
    return TaskInfo(task_id=task_id, name=task_id)


class FakeEvaluator:
    """A search's Evaluator without an app: `tasks(task_id)` says what a task is (None: unknown), `rules` are
    shown in every brief, and each result is stored under a fresh eval_id in `store`."""

    def __init__(self, store: Store, judge: FakeJudge | None = None, *,
                 tasks: Callable[[str], TaskInfo | None] = _any_task, rules: Sequence[RuleRef] = (),
                 timing_available: bool = False, task_rule_ids: Sequence[str] = ()) -> None:
        self.store = store
        self.judge = judge or FakeJudge()
        self._tasks = tasks
        self._rules = list(rules)
        self._task_rule_ids = list(task_rule_ids)
        self._timing = timing_available

    @property
    def timing_available(self) -> bool:
        return self._timing

    @property
    def gpu_name(self) -> str | None:
        return None

    def task_info(self, task_id: str) -> TaskInfo:
        info = self._tasks(task_id)
        if info is None:
            raise NotFound(f"unknown task_id {task_id!r}")
        return info

    def rules(self, task_id: str) -> list[RuleRef]:
        return list(self._rules)

    def task_rule_ids(self, task_id: str) -> list[str]:
        return list(self._task_rule_ids)

    def evaluate(self, task_id: str, kernel_source: str, progress: Progress | None = None) -> Evaluation:
        info = self.task_info(task_id)
        spec = TaskSpec(task_id=task_id, name=info.name, source="", degenerate=info.degenerate)
        evaluation = self.judge.evaluate(spec, kernel_source, progress=progress)
        evaluation.eval_id = new_id("ev")
        with self.store.write() as tx:
            record_evaluation(tx, evaluation, kernel_source)
        return evaluation


__all__ = ["FakeEvaluator", "FakeJudge", "fake_verdict"]
