"""Correctness of one trial's call, judged in the referee from what it can check itself.

Answers the shortcuts of a call that looks right to the candidate's own process: no kernel of its own launched
(the work left to PyTorch: `no_triton_kernel`), an output that is a view of an input (`output_aliases_input`),
an input written in place (`input_mutated`: on a GPU the referee reads the very memory it lent, on the CPU the
runner's copies after the call, never its own report), and outputs that differ from the reference's beyond the
task's tolerance (a mismatch, which the copied line-up gets one more chance at: trials.py). On the first trial,
which passed, the output's precision is measured against a float64 reference (measured_precision.py).
"""

from __future__ import annotations

from typing import Any

from .. import wire
from ..answers import CallAnswer
from ..compare import ALIASED, compare, mutated_input
from ..replay import LAUNCHED_NAMES_SEEN
from .construction import note_flags
from .context import Judging
from .measured_precision import check_measured_precision

NO_KERNEL = ("no Triton kernel defined in the candidate launched during the forward call; the work must be done by "
             "the candidate's own @triton.jit kernels")


def judge_call(ev: Judging, trial: int, reply: Any, bufs: list, inputs: list, lent: list, ref_out: Any,
               opened: dict) -> dict | None:
    """One trial's answer: the mismatch (a dict) or None; every other failure goes in `ev.out`."""
    out, answer = ev.out, CallAnswer.parse(reply, LAUNCHED_NAMES_SEEN)
    if answer.failure is not None:  # the call failed, or the GPU compiler's front end refused what it ran
        out.error(answer.failure)
        if not answer.frontend and answer.failure.oom:
            out.warnings.append("the candidate ran out of device memory; its process was discarded")
        return None
    note_flags(ev, answer.flags, "during the forward call")
    if answer.unconfirmed and answer.unconfirmed not in out.unconfirmed:
        out.unconfirmed.append(answer.unconfirmed)
    if not kernels_launched(ev, answer) or not output_is_its_own(ev, answer):
        return None
    try:
        got = wire.decode_value(answer.outputs, bufs, opened=opened)
    except wire.WireError as exc:
        out.reject("bad_output", f"the candidate's output could not be read as plain tensors: {exc}")
        return None
    if not inputs_unchanged(ev, answer, bufs, inputs, lent):
        return None
    atol, rtol = ev.tol
    mismatch = compare(ref_out, got, trial, atol, rtol, ev.limits.max_rel_norm)
    if mismatch is None and trial == 0:
        check_measured_precision(ev, ref_out, got)  # the first trial's set is still kept by the reference
    if mismatch is not None and ev.plan.role(trial):
        mismatch["inputs"] = ev.plan.role(trial)  # the trial's inputs were not a plain draw
    return mismatch


def kernels_launched(ev: Judging, answer: CallAnswer) -> bool:
    """At least one of the candidate's own kernels launched during the call (the runner's report, kept for the
    result; the replay checks later that they did the work)."""
    ev.out.kernels.extend(n for n in dict.fromkeys(answer.launched) if n not in ev.out.kernels)
    if not answer.launched:
        ev.out.reject("no_triton_kernel", NO_KERNEL)
    return bool(answer.launched)


def output_is_its_own(ev: Judging, answer: CallAnswer) -> bool:
    """No output aliases an input, and every output could be sent as a plain tensor (checked before the inputs:
    an unsendable answer has none)."""
    if answer.aliased:
        ev.out.reject("output_aliases_input", ALIASED)
        return False
    if answer.unsendable is not None:
        ev.out.reject("bad_output", answer.unsendable)
        return False
    return True


def inputs_unchanged(ev: Judging, answer: CallAnswer, bufs: list, inputs: list, lent: list) -> bool:
    """The lent inputs are as the reference drew them after the call."""
    if ev.device == "cuda":  # the candidate wrote into the very memory the referee maps
        changed = mutated_input(inputs, lent)
    else:  # the runner's copies after the call, compared here (its own report could be patched)
        try:
            changed = mutated_input(inputs, list(wire.decode_value(answer.inputs_after, bufs)))
        except (wire.WireError, TypeError, KeyError, AttributeError):
            ev.out.reject("bad_output", "the candidate's process did not send back its inputs after the call")
            return False
    if changed is not None:
        ev.out.reject("input_mutated", f"the forward call modified input {changed} in place; inputs must stay unchanged")
        return False
    return True
