"""The one context every check works on: the evaluation being decided, as the checks see it.

A Protocol, not the Evaluation class itself, so the checks name exactly what they use and import nothing
from evaluation.py (which walks them). `evaluation.Evaluation` is the one class that implements it; a test
may pass any object with these attributes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...config import JudgeLimits
from ..outcome import Outcome
from ..referee import Reference, Referee
from ..processes import RunnerHandle
from .trial_plan import TrialPlan

if TYPE_CHECKING:
    from ..replay import PendingReplay
    from .roofline import Timed

Progress = Callable[[float, str], None]


class Judging(Protocol):
    """What a check may read and call: the referee and the task's reference runner, the candidate's runner,
    the result being assembled (`out`, with `fidelity` for what the checks report), and the trials."""

    referee: Referee
    ref: Reference  # the runner the trials draw from (a check may point it elsewhere for a while)
    req: dict
    cand: RunnerHandle  # the candidate's runner
    device: str  # "cuda" or "cpu"
    module: str  # the candidate's module name (the kernel cache's key)
    out: Outcome
    fidelity: dict[str, Any]
    limits: JudgeLimits
    deadline: float
    progress: Progress
    plan: TrialPlan  # which trial is replayed, reuses a buffer, is off-distribution
    tol: tuple[float, float]  # (atol, rtol), set from the first trial's output dtype
    in_bytes: int  # one set's inputs
    out_bytes: int  # one set's outputs
    set_bytes: int  # a trial set's inputs, outputs and their copies
    host_values: Any  # the last trial's host values (host_inputs.py), kept for the replay's draw
    source_precision: tuple[list[str], bool]  # precision.source_reasons of the candidate's source
    replay: PendingReplay | None  # the replay running beside the last trials
    work_checked: bool  # the replay was judged, and the work is the candidate's
    timed: Timed | None  # the timing's numbers, for the roofline check (GPU only)

    @property
    def keep_cache(self) -> bool: ...

    def mark(self, stage: str) -> None: ...

    def cand_call(self, header: dict, buffers: list[Any] = ..., max_reply: int = ...) -> tuple[dict, list]: ...

    def trial_batch(self, first: int, count: int, n: int, seeds: list[int] | None = None) -> dict | None: ...

    def make_inputs(self, seeds: list[int], key: str, keep: list | None = None,
                    scaled: list[int] = ...) -> list[tuple[list[Any], Any]]: ...

    def release(self, candidate: bool = True) -> None: ...

    def copy_reference_parameters(self) -> bool: ...
