"""What a referee answers the server: the result's fields, and apart from them what the answer says about the
judge's own processes (`Control`).

The fields become the `models.Evaluation` (api.py); the control flags decide what the pool does with the referee
that answered (replace it, retry the request once) and never reach a stored result. Both travel between
processes as plain dicts (`to_wire`, `from_wire`: a multiprocessing Pipe, or a Ray actor's return value).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Gone:
    """The candidate's runner timed out, died or broke the protocol and was killed (runners.RunnerGone): the
    server builds the verdict's error from it (api.py)."""

    kind: str  # "timeout" | "crashed" | "protocol"
    log: str = ""
    status: int | None = None
    message: str = ""
    limits: list[str] = field(default_factory=list)


@dataclass
class Control:
    """The referee's word on itself, apart from the verdict."""

    poisoned: bool = False  # a runner's error left CUDA unusable, or a judge bug: replace the referee
    recycle: bool = False  # something ran out of memory, or memory stayed behind: replace it after answering
    oom_retry: bool = False  # an out-of-memory failed the evaluation: worth once more on a fresh referee
    internal_error: str | None = None  # a bug in the judge (its traceback): the server raises it
    gone: Gone | None = None  # the candidate's runner is gone: the verdict is a timeout or a crash

    @property
    def spent(self) -> bool:
        """Whether the referee that answered must be replaced: a judge bug, a poisoned CUDA context, or an
        out-of-memory (whatever held the memory goes with its processes; the next evaluation starts clean)."""
        return self.poisoned or self.recycle or self.internal_error is not None


@dataclass
class RefereeResult:
    """One answer of a referee: `fields` (the verdict and what the result says) and `control`."""

    fields: dict[str, Any] = field(default_factory=dict)
    control: Control = field(default_factory=Control)

    def to_wire(self) -> dict[str, Any]:
        return {"fields": self.fields, "control": asdict(self.control)}

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> "RefereeResult":
        """Rebuilt from `to_wire`'s dict (sent by the judge's own trusted processes)."""
        control = dict(raw.get("control") or {})
        gone = control.pop("gone", None)
        return cls(dict(raw.get("fields") or {}), Control(**control, gone=Gone(**gone) if gone else None))

    @classmethod
    def failed(cls, traceback: str) -> "RefereeResult":
        """A judge bug: no fields, the referee marked poisoned."""
        return cls({}, Control(poisoned=True, internal_error=traceback))
