"""What the referee remembers of a task's reference timings, and when it may reuse them.

Timing the reference (four strict blocks, a TF32 block, two compiled blocks) held the GPU's timing lock
for 0.39-0.44 s of every evaluation on the H200, as long as the candidate's own blocks, and with 8
evaluations in flight the lock was the bottleneck (bench/results/2026-12-04-c: 1.02 s held per evaluation,
52.5 evaluations per minute). Speedups already divide by the median of the last reference medians, so a
fresh timing moved a speedup by a fraction of itself; what a fresh timing adds beyond that is following
the GPU's drift. So the reference is timed afresh on the first `MIN_FRESH` evaluations of a task, then on
every `RETIME_EVERY`-th, and whenever its last timing is older than `REUSE_S` seconds; in between an
evaluation reuses the newest timing and says so (`Timing.reference_timed_s_ago`).

A reused timing cannot be slowed down by the candidate being judged (its process never ran beside it),
and the hidden-work checks calibrate on every remembered timing of the task: more of the reference's
blocks only makes their most generous bound more generous (noise helps the candidate, never hurts it).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .hidden_work import Block, samples

MIN_FRESH = 3  # timings of a task before any is reused
RETIME_EVERY = 4  # at least every 4th evaluation of a task times the reference afresh
REUSE_S = 120.0  # a timing older than this is never reused
KEPT = 4  # timings whose blocks calibrate the hidden-work checks
MEDIANS = 8  # reference medians whose median a speedup divides by


@dataclass
class ReferenceTiming:
    """One fresh timing of the reference: its blocks of each kind, and when it was taken."""

    strict: list[Block]
    tf32: list[Block]
    compiled: dict[str, Any]  # "blocks" and "compile_s", or "unavailable" (referee_baselines)
    at: float = field(default_factory=time.monotonic)

    @staticmethod
    def median(blocks: list[Block]) -> float:
        return statistics.median(samples(blocks))


class ReferenceTimings:
    """A task's reference timings in one referee (see the module docstring for the reuse policy)."""

    def __init__(self) -> None:
        self.kept: deque[ReferenceTiming] = deque(maxlen=KEPT)
        self.medians: deque[tuple[float, float]] = deque(maxlen=MEDIANS)  # (strict, TF32) per fresh timing
        self.fresh = 0  # fresh timings so far
        self.since_fresh = 0  # evaluations since the last fresh timing

    def reusable(self, compiled_settled: bool, now: float | None = None) -> ReferenceTiming | None:
        """The timing this evaluation may reuse, or None: time the reference afresh. `compiled_settled`:
        the newest timing includes the compiled reference, or torch.compile is known to fail for the task
        (otherwise a fresh timing is where it gets compiled and timed)."""
        if not self.kept or self.fresh < MIN_FRESH or self.since_fresh + 1 >= RETIME_EVERY or not compiled_settled:
            return None
        newest = self.kept[-1]
        if (time.monotonic() if now is None else now) - newest.at > REUSE_S:
            return None
        return newest

    def add(self, timing: ReferenceTiming) -> None:
        self.kept.append(timing)
        self.medians.append((ReferenceTiming.median(timing.strict), ReferenceTiming.median(timing.tf32)))
        self.fresh += 1
        self.since_fresh = 0

    def reused(self) -> None:
        self.since_fresh += 1

    def strict_records(self) -> list[list[Block]]:
        """Every remembered timing's strict blocks, one list per timing (the hidden-work checks' calibration)."""
        return [t.strict for t in self.kept]

    def speedup_bases(self) -> tuple[float, float]:
        """(strict, TF32) medians a speedup divides by: the median of the last fresh medians."""
        return (statistics.median(m[0] for m in self.medians), statistics.median(m[1] for m in self.medians))


__all__ = ["ReferenceTiming", "ReferenceTimings"]
