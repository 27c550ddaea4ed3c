"""The one context every fidelity check works on: the evaluation being decided, as the checks see it.

A Protocol, not the Evaluation class itself, so the checks name exactly what they use and import nothing
from evaluation.py (which calls them)."""

from __future__ import annotations

from typing import Any, Protocol

from ...config import JudgeLimits
from ..outcome import Outcome
from ..referee import Referee


class Judging(Protocol):
    """What a check may read and call: the referee and the task's reference runner, the candidate's runner,
    the result being assembled (`out`, with `fidelity` for what the checks report), and the trials."""

    referee: Referee
    ref: Any  # referee.Reference: the runner the trials draw from (a check may point it elsewhere for a while)
    req: dict
    cand: Any  # runners.RunnerHandle: the candidate's runner
    module: str  # the candidate's module name (the kernel cache's key)
    out: Outcome
    fidelity: dict[str, Any]
    limits: JudgeLimits
    deadline: float
    set_bytes: int  # a trial set's inputs, outputs and their copies

    @property
    def keep_cache(self) -> bool: ...

    def cand_call(self, header: dict, buffers: list[Any] = ..., max_reply: int = ...) -> tuple[dict, list]: ...

    def trial_batch(self, first: int, count: int, n: int, seeds: list[int] | None = None) -> dict | None: ...

    def copy_reference_parameters(self) -> bool: ...
