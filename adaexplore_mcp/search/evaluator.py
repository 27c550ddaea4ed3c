"""What a search needs from the rest of the server, as one small interface.

The search judges kernels and shows tasks and rules in its briefs, but owns none of them: the app hands it
one object that judges a kernel, records the failure and stores the evaluation (`KernelEvaluator`), and
tests hand it `FakeEvaluator` (search/fake_judge.py), which keeps the same promises without workers.
Nothing here calls back into the app.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from adaexplore_mcp.models import Evaluation, RuleRef, TaskInfo

Progress = Callable[[float, str], None]


class Evaluator(Protocol):
    @property
    def timing_available(self) -> bool:
        """Whether evaluations are timed (a GPU): the briefs say how kernels are scored."""
        ...

    @property
    def gpu_name(self) -> str | None:
        """The GPU kernels are timed on, when known (None without a GPU or before the first timed evaluation)."""
        ...

    def task_info(self, task_id: str) -> TaskInfo:
        """The task as a brief shows it; NotFound for an unknown id."""
        ...

    def rules(self, task_id: str) -> Sequence[RuleRef]:
        """The validity rules to show in a brief for this task."""
        ...

    def task_rule_ids(self, task_id: str) -> Sequence[str]:
        """The rules of this task's own failure clusters, most frequent first (briefs rank them high)."""
        ...

    def evaluate(self, task_id: str, kernel_source: str, progress: Progress | None = None) -> Evaluation:
        """Judge one kernel. The result is stored before it is returned: its `eval_id` names the row of
        `evaluations` that a node of the search links to."""
        ...
