"""Precision the source shows: what the candidate's source computes below the task's dtype (fp16/bf16 casts,
TF32 dots), kept relative to the task's dtype once the first trial told it, and what the CPU interpreter cannot
confirm (its fp32 dot is exact, its low-precision arithmetic emulated).

Answers arithmetic below the task's precision that the outputs may not show at the judge's tolerance; the
measured check (measured_precision.py) answers what the source does not show.
"""

from __future__ import annotations

from .. import precision
from .context import Judging

INTERP_TF32 = "fp32 tl.dot is exact under the interpreter; on a GPU it defaults to TF32 (input_precision='tf32')"
INTERP_LOWP = "fp16/bf16 arithmetic is emulated by the interpreter; GPU rounding may differ"


def report_source_precision(ev: Judging) -> None:
    """The source's precision reasons that matter for this task's dtype go first in the result's reasons."""
    reasons, tf32_dot = ev.source_precision
    kept = precision.relative_to_task(reasons, ev.out.task_dtype)
    ev.out.precision_reasons[:0] = kept
    if ev.device == "cpu":
        if tf32_dot and ev.out.task_dtype == "float32":
            ev.out.unconfirmed.append(INTERP_TF32)
        if any("16" in r or "half" in r for r in reasons):
            ev.out.unconfirmed.append(INTERP_LOWP)
