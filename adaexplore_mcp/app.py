"""The application: wires tasks, judge, search and memory over one store. No MCP here.

`server.py` is a thin vocabulary over this object, and tests, benchmarks and the demo use it directly.
Data flows one way (ARCHITECTURE.md): app -> (tasks | judge | search | memory) -> store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from adaexplore_mcp.config import Settings
from adaexplore_mcp.errors import UserError
from adaexplore_mcp.models import Backend, Evaluation, TaskInfo, TaskProbe
from adaexplore_mcp.store import Store, dumps, new_id
from adaexplore_mcp.tasks.format import TaskFormatError, TaskSpec, check_small_shapes, check_static, source_hash
from adaexplore_mcp.tasks.registry import TaskRegistry

Progress = Callable[[float, str], None]


class JudgeLike(Protocol):
    """What the app needs of a judge (the real one runs workers; tests may pass a fake)."""

    @property
    def backend(self) -> Backend: ...

    def evaluate(
        self, task: TaskSpec, kernel_source: str, timeout_s: float | None = None, progress: Progress | None = None
    ) -> Evaluation: ...

    def probe_task(self, task: TaskSpec, timeout_s: float | None = None) -> TaskProbe: ...

    def close(self) -> None: ...


class App:
    def __init__(self, settings: Settings, judge: JudgeLike | None = None) -> None:
        self.settings = settings
        settings.home.mkdir(parents=True, exist_ok=True)
        _register_part_migrations()
        self.store = Store(settings.db_path)
        self.tasks = TaskRegistry(self.store)
        self._judge = judge
        self._register_builtins()

    # -- judge -------------------------------------------------------------------------------
    @property
    def judge(self) -> JudgeLike:
        if self._judge is None:
            from adaexplore_mcp.judge import Judge

            self._judge = Judge(self.settings)
        return self._judge

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
        self.store.close()

    # -- tasks -------------------------------------------------------------------------------
    def create_task(
        self,
        name: str,
        reference_source: str,
        small_shapes: dict[str, int] | None = None,
        description: str = "",
        origin: str = "user",
    ) -> tuple[TaskInfo, bool]:
        """Validate, probe in a worker (runs the reference on several seeds), then register."""
        if not name or not name.strip():
            raise UserError("name must be a non-empty string, e.g. 'fused_gelu'")
        check_static(reference_source, self.settings.max_source_bytes)
        shapes = check_small_shapes(reference_source, small_shapes)
        spec = TaskSpec(task_id=f"probe-{source_hash(reference_source)}", name=name, source=reference_source,
                        small_shapes=shapes)
        probe = self.judge.probe_task(spec)
        if not probe.ok:
            raise TaskFormatError(f"the reference does not run: {probe.error}")
        return self.tasks.register(name, reference_source, probe, origin=origin, small_shapes=shapes,
                                   description=description)

    def _register_builtins(self) -> None:
        """Built-ins are this project's own tested code: registered without a probe, once."""
        from adaexplore_mcp.tasks.library import builtin_tasks

        for task in builtin_tasks():
            if not self.tasks.exists(task.name):
                self.tasks.register(task.name, task.source, TaskProbe(ok=True), origin="builtin",
                                    small_shapes=task.small_shapes, description=task.description,
                                    task_id=task.name)

    # -- judge -------------------------------------------------------------------------------
    def evaluate_kernel(
        self, task_id: str, kernel_source: str, timeout_s: float | None = None, progress: Progress | None = None
    ) -> Evaluation:
        spec = self.tasks.spec(task_id)
        self._check_kernel_source(kernel_source)
        if timeout_s is not None and not (0 < timeout_s <= self.settings.limits.max_timeout_s):
            raise UserError(f"timeout_s must be in (0, {self.settings.limits.max_timeout_s}] seconds")
        started = time.monotonic()
        evaluation = self.judge.evaluate(spec, kernel_source, timeout_s=timeout_s, progress=progress)
        evaluation.eval_id = new_id("ev")
        evaluation.degenerate_task = evaluation.degenerate_task or spec.degenerate
        if spec.degenerate and "degenerate task" not in " ".join(evaluation.warnings):
            evaluation.warnings.append(
                "degenerate task: a constant output would pass this task's check; a pass proves little"
            )
        evaluation.duration_s = evaluation.duration_s or round(time.monotonic() - started, 3)
        self._record(evaluation, kernel_source)
        return evaluation

    def _check_kernel_source(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise UserError("kernel_source is empty; send Python source defining class ModelNew")
        size = len(source.encode())
        if size > self.settings.max_source_bytes:
            raise UserError(
                f"kernel_source is {size} bytes; the limit is {self.settings.max_source_bytes} bytes "
                "(set ADAEXPLORE_MAX_SOURCE_BYTES to change it)"
            )

    def _record(self, evaluation: Evaluation, kernel_source: str) -> None:
        with self.store.write() as tx:
            tx.execute(
                "INSERT INTO evaluations (eval_id, task_id, source_hash, kernel_source, verdict, speedup, backend,"
                " result, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (evaluation.eval_id, evaluation.task_id, source_hash(kernel_source), kernel_source,
                 evaluation.verdict.value, evaluation.speedup, evaluation.backend,
                 evaluation.model_dump_json(), time.time()),
            )


def _register_part_migrations() -> None:
    """Import the parts that own tables so their migrations are registered before the store opens."""
    import adaexplore_mcp.memory  # noqa: F401
    import adaexplore_mcp.search  # noqa: F401


__all__ = ["App", "JudgeLike", "dumps"]
