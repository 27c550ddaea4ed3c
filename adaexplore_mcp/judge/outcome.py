"""What one evaluation's result is assembled in (`Outcome`), and the fresh seeds its draws use. What the
referee answers is `Outcome.result()`: the fields, and apart from them the control flags (result.py)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from ..errors import printable
from ..models import Verdict
from .answers import Failure
from .replay import LAUNCHED_NAMES_KEPT
from .result import Control, Gone, RefereeResult


def fresh_seed() -> int:
    """Never the same twice: a candidate cannot memorize outputs per seed (torch seeds are 63-bit)."""
    return secrets.randbits(63)


@dataclass
class Outcome:
    """The evaluation being assembled; `result()` is what travels to the server process."""

    verdict: Verdict = Verdict.passed
    fields: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    precision_reasons: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # every kernel a trial launched; the result lists the first
    task_dtype: str = "float32"
    measured: dict[str, float] | None = None  # checks/measured_precision.py
    oom: bool = False  # something ran out of memory: this referee is replaced after answering (`recycle`)
    gone: Gone | None = None  # the candidate's runner timed out or died (the verdict says which)

    def fail(self, verdict: Verdict, **fields: Any) -> "Outcome":
        self.verdict = verdict
        self.fields.update(fields)
        return self

    def error(self, reply: Failure | Any) -> "Outcome":
        """A failure the runner classified (a `Failure`, or the reply it came in): its text is untrusted, trimmed
        and validated here."""
        failure = reply if isinstance(reply, Failure) else Failure.of(reply)
        self.oom = self.oom or failure.oom
        verdict = failure.verdict
        if verdict not in ("compile_error", "runtime_error", "crashed"):
            verdict = "runtime_error"
        raw = failure.error
        if not isinstance(raw, dict) and failure.internal:
            raw = {"exception": "RunnerError", "message": f"the candidate's process failed: {failure.internal}"}
        return self.fail(Verdict(verdict), error=_detail(raw))

    def reject(self, check: str, message: str) -> "Outcome":
        return self.fail(Verdict.rejected, rejected={"check": check, "message": message})

    @property
    def done(self) -> bool:
        return self.verdict != Verdict.passed

    def as_dict(self) -> dict[str, Any]:
        """The result's fields (the verdict and what it says)."""
        return {"verdict": self.verdict.value, **self.fields, "warnings": self.warnings,
                "precision": {"below_fp32": bool(self.precision_reasons), "reasons": self.precision_reasons,
                              "task_dtype": self.task_dtype, "measured": self.measured},
                "unconfirmed": self.unconfirmed, "kernels_launched": self.kernels[:LAUNCHED_NAMES_KEPT]}

    def result(self) -> RefereeResult:
        """The fields, and the control flags apart: after an out-of-memory the referee is replaced, and a failed
        evaluation is worth one retry on a fresh one (H200: with 6 GiB tasks the judge's own processes held the
        rest of the GPU)."""
        return RefereeResult(self.as_dict(), Control(recycle=self.oom, oom_retry=self.oom and self.done,
                                                     gone=self.gone))

def _detail(raw: Any) -> dict[str, Any]:
    raw = raw if isinstance(raw, dict) else {}
    text = {k: printable(str(raw.get(k) or ""))[:limit]
            for k, limit in (("exception", 80), ("message", 400), ("excerpt", 1500))}
    line, lineno = raw.get("source_line"), raw.get("source_lineno")
    root, root_message = raw.get("root_exception"), raw.get("root_message")  # classify.root_cause: memory signs it
    return {**text, "exception": text["exception"] or "Error", "source_line": printable(str(line))[:300] if line else None,
            "source_lineno": lineno if isinstance(lineno, int) and not isinstance(lineno, bool) else None,
            "root_exception": printable(root)[:80] if isinstance(root, str) else None,
            "root_message": printable(root_message)[:1000] if isinstance(root_message, str) else None,
            "root_in_kernel": raw.get("root_in_kernel") is True}
