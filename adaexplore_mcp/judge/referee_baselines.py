"""Two yardsticks besides the eager reference, measured by the referee after it (`referee_timing.py`):

- the reference under `torch.compile` (default mode): compiled once per reference runner (the runner is
  cached per task), outside the GPU lock and after every other measurement, so a compile that overruns
  kills only the reference's process and nothing of the evaluation is lost; then timed in blocks like
  the TF32 reference (its own events). Its compile time is reported only by the evaluation that paid it;
  a task whose compile fails says why (`compile_unavailable`) and is not compiled again by this referee;
- the roofline (`roofline.py`): the task's minimum bytes and the reference's FLOPs (from the task, or
  counted once by the reference's runner), against this GPU's peaks; a candidate's median under the
  physical floor is impossible for a correct kernel.

`sides` is referee_timing's `_Sides` (the reference's runner: lend input sets, time a block, release).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..models import TaskCost
from . import roofline
from .referee import ReferenceFailure
from .timing import gpu_lock, summarize

if TYPE_CHECKING:
    from .checks.context import Judging

COMPILE_MODE = "default"
COMPILE_LIMIT_S = 90.0  # one torch.compile of a reference; beyond it the task is not compiled again here
COMPILE_MIN_S = 10.0  # less time than this left in the evaluation: a later evaluation compiles instead
COMPILED_BLOCKS = (1, 2)
_compile_failed: dict[tuple, str] = {}  # per reference key, in this referee: why torch.compile is unavailable
_compile_overran: dict[tuple, float] = {}  # per reference key: seconds a compile was given and overran
_compiled_history: dict[tuple, deque] = {}


def release_quietly(sides: Any) -> None:
    """Release the reference's kept tensors, unless a failure took its process."""
    if sides.ev.ref.runner.alive:
        sides.release_ref()


# -- torch.compile --------------------------------------------------------------------------------------
def compile_ready(ev: Judging, compiled: dict[str, Any]) -> bool:
    """Whether the reference's runner holds its compiled model already (a failure is noted in `compiled`)."""
    failed = _compile_failed.get(ev.ref.key)
    if failed is None:
        try:
            reply, _ = ev.referee.call_ref(ev.ref, {"op": "compile"}, ev.deadline, "asking for the compiled reference")
        except ReferenceFailure as exc:  # its process went (counting its work, say): nothing to time now
            compiled["unavailable"] = f"the reference's process failed ({str(exc)[:200]}); a later evaluation compiles"
            return False
        if reply.get("compile_error"):
            failed = _compile_failed[ev.ref.key] = f"torch.compile failed: {str(reply['compile_error'])[:300]}"
        elif reply.get("ready"):
            return True
    if failed is not None:
        compiled["unavailable"] = failed
    return False


def compile_settled(ev: Judging, timings: Any) -> bool:
    """Whether a fresh reference timing would add nothing to the compiled yardstick: the newest timing
    (`reference_timings.ReferenceTimings`) includes it, or this referee knows torch.compile fails for the
    task or overruns what an evaluation has (so a reused timing may stand for it)."""
    newest = timings.kept[-1] if timings.kept else None
    return (newest is not None and bool(newest.compiled.get("blocks"))) or ev.ref.key in _compile_failed \
        or ev.ref.key in _compile_overran


def compile_and_time(ev: Judging, sides: Any, seeds: list[int], calls: int, compiled: dict[str, Any]) -> None:
    """Compile the reference (outside the GPU lock: seconds of CPU), then time it under the lock."""
    started = time.monotonic()
    left = ev.deadline - started - 2.0
    if not ev.ref.runner.alive:
        compiled["unavailable"] = "the reference's process is gone; a later evaluation compiles it"
        return
    if left < COMPILE_MIN_S:
        compiled["unavailable"] = ("too little time was left in this evaluation to compile the reference with "
                                   "torch.compile; a later evaluation will")
        return
    limit = min(COMPILE_LIMIT_S, left)
    overran = _compile_overran.get(ev.ref.key)
    if overran is not None and limit < 1.5 * overran:  # it would overrun again, and kill the reference again
        compiled["unavailable"] = (f"torch.compile of this reference needed more than the {overran:.0f} s an "
                                   "evaluation had left; evaluate with a larger timeout_s to get it")
        return
    try:
        reply, _ = ev.referee.call_ref(ev.ref, {"op": "compile", "build": True, "mode": COMPILE_MODE},
                                       started + limit, "compiling the reference with torch.compile")
    except ReferenceFailure as exc:
        if limit < COMPILE_LIMIT_S and time.monotonic() - started >= limit - 1.0:
            _compile_overran[ev.ref.key] = limit
            compiled["unavailable"] = (f"torch.compile did not finish in the {limit:.0f} s this evaluation had "
                                       "left; an evaluation with a larger timeout_s will try again")
        else:
            compiled["unavailable"] = _compile_failed[ev.ref.key] = f"torch.compile failed: {str(exc)[:300]}"
        return
    finally:
        ev.mark("compile")
    if not reply.get("ready"):
        why = f"torch.compile failed: {str(reply.get('compile_error') or 'no reason given')[:300]}"
        compiled["unavailable"] = _compile_failed[ev.ref.key] = why
        return
    compiled["compile_s"] = round(time.monotonic() - started, 2)
    with gpu_lock(ev.referee.home, ev.referee.physical_index or 0):
        sets = sides.inputs_only(seeds, "timing")
        sides.release_early()
        compiled["blocks"] = time_compiled(ev, sides, sets, calls, compiled)
        del sets
        release_quietly(sides)


def time_compiled(ev: Judging, sides: Any, sets: list[list[Any]], calls: int, compiled: dict[str, Any]) -> list:
    """Blocks of the compiled reference on the lent sets (its events only, as the TF32 reference)."""
    blocks = []
    try:
        for length in COMPILED_BLOCKS:
            n = length * calls
            times, wall, outs = sides.time_ref(sets, n, variant="compiled")
            del outs
            if not times:
                raise ReferenceFailure("the compiled reference answered no times")
            sides.release_early("timed")
            blocks.append((times, wall, n))
    except ReferenceFailure as exc:
        compiled["unavailable"] = _compile_failed[ev.ref.key] = f"timing the compiled reference failed: {str(exc)[:300]}"
        return []
    return blocks


def compiled_median(ev: Judging, compiled: dict[str, Any], timing: dict[str, Any], fresh: bool = True) -> float | None:
    """The compiled reference's stats in `timing`; the median of its last medians (as for the eager one),
    to which a `fresh` timing adds its own."""
    blocks = compiled.get("blocks")
    if not blocks:
        if timing.get("compile_unavailable") is None:
            timing["compile_unavailable"] = "the compiled reference was not timed"
        return None
    stats = summarize([t for times, _, _ in blocks for t in times])
    timing["reference_compiled"] = stats.model_dump()
    history = _compiled_history.setdefault(ev.ref.key, deque(maxlen=8))
    if fresh or not history:
        history.append(stats.median_ms)
    return statistics.median(history)


# -- the roofline -----------------------------------------------------------------------------------------
def hardware_context(ev: Judging) -> dict[str, Any]:
    """What the roofline needs besides the times: the task's cost, this GPU's peaks, the clocks now."""
    try:
        peak: roofline.Peak | str = roofline.peak_for(ev.referee.gpu_name)
    except Exception as exc:  # noqa: BLE001 - the bandwidth measurement of an unknown GPU failing
        peak = f"no peak bandwidth for this GPU ({type(exc).__name__})"
    try:
        clocks = roofline.read_clocks(0)
    except Exception:  # noqa: BLE001 - clocks are context, never a reason to fail
        clocks = None
    return {"cost": task_cost(ev), "peak": peak, "clocks": clocks.model_dump() if clocks is not None else None}


def task_cost(ev: Judging) -> TaskCost | str:
    """The task's minimum bytes and FLOPs: from the task when it carries them, else counted by the
    reference's runner (once per runner, cached there); a string says why there are none."""
    raw = ev.req["task"].get("cost")
    if not isinstance(raw, dict):
        try:
            reply, _ = ev.referee.call_ref(ev.ref, {"op": "cost"}, ev.deadline, "counting the reference's work")
        except ReferenceFailure as exc:
            return f"counting the reference's bytes and FLOPs failed: {str(exc)[:200]}"
        raw = reply.get("cost")
        if not isinstance(raw, dict):
            return str(reply.get("cost_unavailable") or "the reference's bytes were not counted")[:300]
    try:
        cost = TaskCost.model_validate(raw)
    except ValidationError:
        return "the reference's process answered a malformed count"
    return cost if cost.min_bytes > 0 else "the task moves no bytes (no tensor inputs or outputs)"


def roofline_of(ev: Judging, timing: dict[str, Any], hardware: dict[str, Any], cand_ms: float,
                reference_ms: list[float]) -> str | None:
    """The roofline in `timing` (or why there is none); why the candidate's time is impossible, if it is."""
    cost, peak = hardware.get("cost"), hardware.get("peak")
    for missing in (cost, peak):
        if isinstance(missing, str) or missing is None:
            timing["roofline_unavailable"] = missing or "not measured"
            return None
    basis = roofline.flops_basis(ev.out.task_dtype, bool(ev.out.precision_reasons))
    roof, impossible = roofline.assess(cost, cand_ms, reference_ms, peak, basis)
    timing["roofline"] = roof.model_dump()
    return impossible


__all__ = ["COMPILE_MODE", "compile_and_time", "compile_ready", "compile_settled", "compiled_median", "hardware_context",
           "release_quietly", "roofline_of", "task_cost", "time_compiled"]
