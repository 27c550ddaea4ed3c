"""What a speedup means, the same everywhere it is shown: against the eager reference, the TF32 reference,
torch.compile, and the share of the roofline. One place builds the summary from an evaluation (or its
stored JSON) and one writes it as text, so a brief, a tree, an exported file and a report never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .models import Evaluation, Speedups


def of_evaluation(ev: Evaluation) -> Speedups | None:
    """The evaluation's speedups; None when it was not timed."""
    return of_fields(ev.model_dump(include={"speedup", "speedup_tf32", "timing"}))


def ranked(ev: Evaluation) -> tuple[float | None, str | None]:
    """The speedup a search ranks and rewards a pass by, and the yardstick it is measured against.

    A kernel below the task's precision (a TF32 dot, fp16, int8 on a float32 task: `precision.below_fp32`) is
    measured against the reference run at reduced precision (TF32 allowed), never against strict fp32: a
    shortcut the contract forbids must not pay in the search. Otherwise the strict fp32 reference (`speedup`).
    (None, None) when untimed.
    """
    if ev.speedup is None:
        return None, None
    if ev.precision.below_fp32:
        return (ev.speedup_tf32, "tf32") if ev.speedup_tf32 is not None else (None, None)
    return ev.speedup, "fp32"


def of_fields(ev: Mapping[str, Any]) -> Speedups | None:
    """From an evaluation as a mapping (a stored evaluation's JSON, old ones included); None when untimed."""
    eager = _number(ev.get("speedup"))
    if eager is None:
        return None
    timing = ev.get("timing") if isinstance(ev.get("timing"), Mapping) else {}
    roof = timing.get("roofline") if isinstance(timing.get("roofline"), Mapping) else {}
    bound = roof.get("bound")
    return Speedups(eager=eager, tf32=_number(ev.get("speedup_tf32")), compiled=_number(timing.get("speedup_compile")),
                    pct_roofline=_number(roof.get("pct_roofline")), bound=bound if bound in ("memory", "compute") else None)


def of_columns(speedup: float | None, tf32: float | None, compiled: float | None, pct_roofline: float | None,
               bound: str | None) -> Speedups | None:
    """From the few fields a tree query extracts per node (no evaluation JSON parsed in Python)."""
    return of_fields({"speedup": speedup, "speedup_tf32": tf32,
                      "timing": {"speedup_compile": compiled, "roofline": {"pct_roofline": pct_roofline, "bound": bound}}})


def text(s: Speedups | None, untimed: str = "not timed") -> str:
    """'3.70x eager, 3.68x vs TF32, 1.21x vs torch.compile, 64% of roofline (memory-bound)'."""
    if s is None:
        return untimed
    parts = [f"{s.eager:.2f}x eager"]
    if s.tf32 is not None:
        parts.append(f"{s.tf32:.2f}x vs TF32")
    if s.compiled is not None:
        parts.append(f"{s.compiled:.2f}x vs torch.compile")
    if s.pct_roofline is not None:
        parts.append(f"{s.pct_roofline:.0f}% of roofline" + (f" ({s.bound}-bound)" if s.bound else ""))
    return ", ".join(parts)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["of_columns", "of_evaluation", "of_fields", "ranked", "text"]
