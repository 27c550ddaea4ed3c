"""A fake judge for tests and bookkeeping benchmarks (like httpx's MockTransport): source -> Evaluation.

It runs nothing. The verdict and speedup come from a comment in the source,
`# fake: verdict=passed speedup=1.7` (speedup=none for "not timed"), or from a function you pass.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from adaexplore_mcp.models import ErrorDetail, Evaluation, Verdict

_FAKE = re.compile(r"#\s*fake:\s*(?P<body>.*)$", re.MULTILINE)


class FakeJudge:
    def __init__(self, rule: Callable[[str], tuple[str, float | None]] | None = None,
                 default: tuple[str, float | None] = ("passed", None), backend: str = "cpu-interpreter") -> None:
        self.rule = rule
        self.default = default
        self.backend = backend
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def verdict_of(self, source: str) -> tuple[str, float | None]:
        if self.rule is not None:
            return self.rule(source)
        m = None
        for m in _FAKE.finditer(source):
            pass
        if m is None:
            return self.default
        fields = dict(kv.split("=", 1) for kv in m.group("body").split() if "=" in kv)
        speedup = fields.get("speedup", "none")
        return fields.get("verdict", "passed"), None if speedup.lower() == "none" else float(speedup)

    def __call__(self, task_id: str, source: str, progress=None) -> Evaluation:
        """The `evaluate(task_id, source, progress)` callable SearchService takes."""
        with self._lock:
            self.calls.append(source)
        verdict, speedup = self.verdict_of(source)
        error = None
        if verdict not in ("passed", "mismatch", "rejected"):
            error = ErrorDetail(exception="FakeError", message=f"fake {verdict}")
        return Evaluation(task_id=task_id, verdict=Verdict(verdict), backend=self.backend,  # type: ignore[arg-type]
                          speedup=speedup if verdict == "passed" else None, error=error,
                          timing_unavailable=None if speedup is not None else "fake judge: not timed")
