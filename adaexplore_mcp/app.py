"""The application: wires tasks, judge, search and memory over one store. No MCP here.

`server.py` is a thin vocabulary over this object, and tests, benchmarks and the demo use it directly.
Data flows one way (ARCHITECTURE.md): app -> (tasks | judge | search | memory) -> store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from adaexplore_mcp import speedups
from adaexplore_mcp.config import Settings
from adaexplore_mcp.errors import UserError
from adaexplore_mcp.evaluator import JudgeLike, KernelEvaluator, stored_evaluation_json
from adaexplore_mcp.export import (
    MissingReportDependency, SnapshotNode, TreeSnapshot, report_html, report_png, standalone_kernel_file,
)
from adaexplore_mcp.jobs import JobRunner
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.referee import runner_memory_limit
from adaexplore_mcp.memory import MIGRATIONS as MEMORY_MIGRATIONS
from adaexplore_mcp.memory.service import MemoryService
from adaexplore_mcp.models import Evaluation, ExportedKernel, SearchReport, TaskInfo
from adaexplore_mcp.search import MIGRATIONS as SEARCH_MIGRATIONS
from adaexplore_mcp.search import SearchService, SearchTree
from adaexplore_mcp.store import Migration, Store, dumps
from adaexplore_mcp.tasks.format import (TaskFormatError, TaskSpec, check_small_shapes, check_static,
                                         check_task_description, check_task_name, source_hash)
from adaexplore_mcp.tasks.registry import MIGRATIONS as TASK_MIGRATIONS
from adaexplore_mcp.tasks.registry import TaskRegistry
from adaexplore_mcp.tasks.cpu_size import CpuSizeCheck, cpu_size_check, registered_small_warning
from adaexplore_mcp.tasks.shape_advice import large_input_warning, probe_failure_advice

Progress = Callable[[float, str], None]

# Every part's schema changes, handed to the store explicitly (migration 1, the store's own, is implied).
MIGRATIONS: tuple[Migration, ...] = (*SEARCH_MIGRATIONS, *MEMORY_MIGRATIONS, *TASK_MIGRATIONS)


class App:
    """Tasks, judge, search and memory over one store. `judge` may be a fake (`FakeJudge`): nothing else
    changes, so the whole app can be tested without worker processes."""

    def __init__(self, settings: Settings, judge: JudgeLike | None = None) -> None:
        self.settings = settings
        settings.home.mkdir(parents=True, exist_ok=True)
        self.store = Store(settings.db_path, MIGRATIONS)
        self.tasks = TaskRegistry(self.store)
        self.judge: JudgeLike = judge if judge is not None else Judge(settings)  # workers start on first use
        self._register_builtins()
        self.memory = MemoryService(self.store)
        self.jobs = JobRunner(self.store)
        self.evaluator = KernelEvaluator(self.store, self.judge, self.tasks, self.memory)
        self.search = SearchService(self.store, self.evaluator, max_source_bytes=settings.max_source_bytes,
                                    lease_s=settings.step_lease_s)

    def close(self) -> None:
        self.judge.close()
        self.store.close()

    # -- tasks -------------------------------------------------------------------------------
    def create_task(
        self,
        name: str,
        reference_source: str,
        small_shapes: dict[str, int | list[int]] | None = None,
        description: str = "",
        origin: str = "user",
    ) -> tuple[TaskInfo, bool]:
        """Validate, probe in a worker (runs the reference on several seeds), then register.

        A task is (name, source, small_shapes): the same three again return the stored task without
        running it (created false); the same name with another source or other small_shapes becomes a
        task of its own, with its own task_id and a warning. Under the CPU interpreter without small_shapes,
        a task whose inputs (read from the source) are too large to run at full size is registered at
        small_shapes checked by the probe (`_create_at_small_shapes`); large inputs short of that get a
        warning with small_shapes to paste (the task's code never runs in this process).
        """
        check_task_name(name)
        check_task_description(description)
        check_static(reference_source, self.settings.max_source_bytes)
        shapes = check_small_shapes(reference_source, small_shapes)
        on_cpu = self.judge.backend != "cuda"

        def with_size_warning(info: TaskInfo) -> TaskInfo:  # result-time: depends on this server's judge
            if not on_cpu or shapes:
                return info
            warning = large_input_warning(reference_source, [spec.shape for spec in info.inputs])
            return info.model_copy(update={"warnings": [*info.warnings, warning]}) if warning else info

        too_large = cpu_size_check(reference_source, runner_memory_limit()) if on_cpu and not shapes else None
        if too_large is not None:  # never a minute-long full-size run ending in a memory kill (issue 41)
            return self._create_at_small_shapes(name, reference_source, description, origin, too_large)
        known = self.tasks.find(name, reference_source, shapes)
        if known is not None:  # seen before: no need to run the reference again
            return with_size_warning(known), False
        spec = TaskSpec(task_id=f"probe-{source_hash(reference_source)}", name=name, source=reference_source,
                        small_shapes=shapes)
        probe = self.judge.probe_task(spec)
        if not probe.ok:
            error = f"the reference does not run: {probe.error}"
            advice = probe_failure_advice(reference_source, probe.error or "") if on_cpu and not shapes else None
            raise TaskFormatError(f"{error}; {advice}" if advice else error)
        info, created = self.tasks.register(name, reference_source, probe, origin=origin, small_shapes=shapes,
                                            description=description)
        return with_size_warning(info), created

    def _create_at_small_shapes(self, name: str, source: str, description: str, origin: str,
                                check: CpuSizeCheck) -> tuple[TaskInfo, bool]:
        """A task too large for the CPU, registered at the small_shapes suggested for it once the probe has run
        the reference at them; the result says so. The same call again finds it without probing."""
        shapes = check_small_shapes(source, check.suggestion.small_shapes)
        info = self.tasks.find(name, source, shapes)
        created = False
        if info is None:
            spec = TaskSpec(task_id=f"probe-{source_hash(source)}", name=name, source=source, small_shapes=shapes)
            probe = self.judge.probe_task(spec)
            if not probe.ok:
                raise TaskFormatError(
                    f"the reference is too large for the CPU interpreter: {check.estimate()}. It was not run at full "
                    f"size, and at small_shapes={json.dumps(shapes)} it does not run: {probe.error}. Pass small_shapes "
                    "the model accepts (sizes that still fit each other, e.g. divisible by a group count)")
            info, created = self.tasks.register(name, source, probe, origin=origin, small_shapes=shapes,
                                                description=description)
        return info.model_copy(update={"warnings": [*info.warnings, registered_small_warning(check)]}), created

    def _register_builtins(self) -> None:
        """Built-ins are this project's own tested code: registered once without running them (startup stays
        fast); the first evaluation or search of one probes it (`KernelEvaluator.task_spec`)."""
        from adaexplore_mcp.tasks.library import builtin_tasks

        for task in builtin_tasks():
            if not self.tasks.exists(task.name):
                self.tasks.register(task.name, task.source, None, origin="builtin", small_shapes=task.small_shapes,
                                    description=task.description, task_id=task.name)

    # -- judge -------------------------------------------------------------------------------
    def evaluate_kernel(
        self, task_id: str, kernel_source: str, timeout_s: float | None = None, progress: Progress | None = None
    ) -> Evaluation:
        """Check the request, then the one evaluation path (judged, given an id and rules, stored once)."""
        self.tasks.info(task_id)  # an unknown task first: it is the likelier mistake
        self._check_kernel_source(kernel_source)
        if timeout_s is not None and not (0 < timeout_s <= self.settings.limits.max_timeout_s):
            raise UserError(f"timeout_s must be in (0, {self.settings.limits.max_timeout_s}] seconds")
        return self.evaluator.evaluate(task_id, kernel_source, progress=progress, timeout_s=timeout_s)

    def evaluation_json(self, eval_id: str) -> str:
        return stored_evaluation_json(self.store, eval_id)

    # -- exports -----------------------------------------------------------------------------
    def export_kernel(self, search_id: str) -> ExportedKernel:
        """The best kernel of a search as a standalone KernelBench file, written under the data dir."""
        best = self.search.best_kernel(search_id)
        spec = self.tasks.spec(self.search.summary(search_id).task_id)
        timing = best.evaluation.timing if best.evaluation else None
        text = standalone_kernel_file(spec.source, best.kernel_source, {
            "task": spec.name, "speedup": best.speedup, "gpu": timing.gpu if timing else None,
            "speedups": speedups.of_evaluation(best.evaluation) if best.evaluation else None,
            "search_id": search_id, "node_id": str(best.node_id),
        })
        path = self._export_dir() / f"{search_id}_best.py"
        path.write_text(text)
        return ExportedKernel(search_id=search_id, node_id=best.node_id, speedup=best.speedup, path=str(path),
                              source=text)

    def search_report(self, search_id: str, png: bool = True) -> SearchReport:
        """An HTML page (and a PNG when matplotlib is installed) of a search's tree and best-speedup curve."""
        tree = self.search.get_search(search_id)
        snapshot = tree_snapshot(tree, self.tasks.info(tree.task_id).name)
        html_path = self._export_dir() / f"{search_id}_report.html"
        html_path.write_text(report_html(snapshot))
        png_path, png_note = None, None
        if png:
            try:
                png_path = str(report_png(snapshot, self._export_dir() / f"{search_id}_report.png"))
            except MissingReportDependency as exc:
                png_note = str(exc)
        return SearchReport(search_id=search_id, html_path=str(html_path), png_path=png_path, png_note=png_note,
                            steps_used=tree.steps_used, best_speedup=tree.best_speedup,
                            best_node_id=tree.best_node_id, verdicts=snapshot.verdict_counts(),
                            html_uri=f"adaexplore://searches/{search_id}/report.html")

    def _export_dir(self) -> Path:
        path = self.settings.home / "exports"
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- task synthesis ------------------------------------------------------------------------
    def synthesize_tasks(self, count: int, seed: int, progress: Progress | None = None) -> list[TaskInfo]:
        """Practice tasks for Adapt: generated and statically checked here, probed in a worker (never run in
        this process), kept only if the probe runs them and finds them non-degenerate. On the CPU the
        probe runs at small_shapes, so a second probe at full feature sizes (small batch) catches tasks
        that are degenerate only at their real extent."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 200:
            raise UserError("count must be an integer from 1 to 200")
        from adaexplore_mcp.tasks.synthesis import synthesize

        kept: list[TaskInfo] = []
        candidates = synthesize(count * 2, seed)  # spare ones for those the worker probe rejects
        for i, task in enumerate(candidates):
            if len(kept) == count:
                break
            if progress:
                progress(i / len(candidates), f"probing {task.name}")
            try:
                info, _ = self.create_task(task.name, task.source, task.small_shapes, task.description,
                                           origin="synthesized")
            except UserError:
                continue
            if not info.degenerate and not self._degenerate_at_feature_size(task.name, task.source):
                kept.append(info)
        return kept

    def _degenerate_at_feature_size(self, name: str, source: str) -> bool:
        """On the CPU only (a GPU probe already ran at full size): the worker probe at full feature sizes."""
        if self.judge.backend == "cuda":
            return False
        from adaexplore_mcp.tasks.synthesis_checks import probe_shapes

        spec = TaskSpec(task_id=f"probe-{source_hash(source)}-full", name=name, source=source,
                        small_shapes=probe_shapes(source))
        probe = self.judge.probe_task(spec)
        return probe.ok and probe.degenerate

    def _check_kernel_source(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise UserError("kernel_source is empty; send Python source defining class ModelNew")
        size = len(source.encode())
        if size > self.settings.max_source_bytes:
            raise UserError(
                f"kernel_source is {size} bytes; the limit is {self.settings.max_source_bytes} bytes "
                "(set ADAEXPLORE_MAX_SOURCE_BYTES to change it)"
            )

    def evaluation_source(self, eval_id: str) -> tuple[str, str]:
        """(task_id, kernel_source) of a stored evaluation, for tools that run its kernel again (profile_kernel)."""
        from adaexplore_mcp.errors import NotFound

        row = self.store.read_one("SELECT task_id, kernel_source FROM evaluations WHERE eval_id = ?", (eval_id,))
        if row is None:
            raise NotFound(f"unknown eval_id {eval_id!r}; evaluate_kernel and expand_node results carry one")
        return row["task_id"], row["kernel_source"]


def tree_snapshot(tree: SearchTree, task_name: str) -> TreeSnapshot:
    """Map a search's tree onto the export package's plain snapshot (export never reads search types)."""
    nodes = [
        SnapshotNode(node_id=n.node_id, parent_id=n.parent_id, kind=n.kind, verdict=n.verdict, speedup=n.speedup,
                     speedups=n.speedups, reward=n.reward or 0.0, visits=n.visits, step_index=n.step_index, note=n.note)
        for n in tree.nodes
    ]
    return TreeSnapshot(search_id=tree.search_id, task_name=task_name, strategy=tree.strategy, budget=tree.budget,
                        nodes=nodes, best_node_id=tree.best_node_id)


__all__ = ["App", "JudgeLike", "dumps"]
