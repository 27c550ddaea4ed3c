"""Faster than the hardware allows: the candidate's timed median against the task's roofline, then its speedups.

Answers a timing that no kernel could earn: work skipped on timed calls, a result computed before the clock
started, events that lie. The roofline (roofline.py) is the time moving the task's minimum bytes at the GPU's
peak bandwidth takes (its FLOPs at peak too); a candidate faster than that is `rejected`
(`faster_than_hardware`) and gets no speedup. Runs after the timing (GPU only), which leaves its numbers in
`ev.timed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..referee_baselines import roofline_of
from .context import Judging


@dataclass
class Timed:
    """What the timing measured, for this check: the result's `timing` dict (filled in further here), the GPU's
    context, the candidate's per-call milliseconds (the wall clock's where its events missed work), the bases its
    speedups divide, and the yardsticks' medians the roofline is reported against."""

    timing: dict[str, Any]
    hardware: dict[str, Any]
    cand_ms: float
    ref_ms: float
    tf32_ms: float
    compiled_ms: float | None
    yardsticks: list[float] = field(default_factory=list)


def check_faster_than_hardware(ev: Judging) -> None:
    """Reject a candidate faster than its roofline; otherwise record its speedups (and flag an implausible one)."""
    timed, out = ev.timed, ev.out
    if timed is None:
        return
    impossible = roofline_of(ev, timed.timing, timed.hardware, timed.cand_ms, timed.yardsticks)
    if impossible is not None:
        out.reject("faster_than_hardware", impossible)
        return
    out.fields["speedup"] = timed.ref_ms / max(timed.cand_ms, 1e-9)
    out.fields["speedup_tf32"] = timed.tf32_ms / max(timed.cand_ms, 1e-9)
    if timed.compiled_ms is not None:
        timed.timing["speedup_compile"] = timed.compiled_ms / max(timed.cand_ms, 1e-9)
    if out.fields["speedup"] > ev.limits.implausible_speedup:
        out.warnings.append(f"speedup {out.fields['speedup']:.1f}x exceeds {ev.limits.implausible_speedup:g}x: "
                            "flagged for review (is the work really done, every call?)")
