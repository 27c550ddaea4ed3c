"""A second, unseen shape set: the task's constants moved, and the candidate checked there after it passed.

Answers shapes written into the source (rows and columns as literals, a grid sized for the task's one shape,
a mask left out because every size is a multiple of the block): such a candidate is right at the task's shapes
and raises or errs at any other. The set is derived from the task's own top-level integer constants (as the
evaluation runs them: small_shapes applied), and the module is run again with them (tasks/format.py:
`source_with_constants`, so derived constants follow): the batch moves by one, every constant of 16 and more
becomes an odd number about three quarters of it (no multiple of 16 or of any block size); constants under 16
(kernel sizes, strides, channels) stay. Where the reference does not run there, a gentler rung keeps those
constants multiples of 8 (head counts, groups), then only the batch moves; a task none of whose rungs runs says
its constants cannot move (`fidelity.second_shape_set`). What a rung gives is remembered per task in the
referee. Both models are built again there under a fresh seed and perturbed alike (perturbation.py); one trial
is compared (with the reference's parameters copied in by name when the task's shapes needed that line-up),
and a mismatch or an error there names the shape set (`mismatch.shape_set`, the error's message).
The candidate's first model is kept aside in its runner and put back after, so timing runs the model judged.
"""

from __future__ import annotations

from typing import Any

from ...models import Verdict
from ...tasks.format import integer_constants
from ..answers import BuildAnswer
from ..outcome import fresh_seed
from ..referee import Referee, ReferenceFailure
from .context import Judging
from .perturbation import perturb_both

MAX_SET_BYTES = 1 << 30  # a trial set (inputs, outputs, copies) this large: no second reference beside the first
BATCH_NAMES = ("batch", "batch_size", "batchsize", "bs", "n_batch", "num_batches")
_moved: dict[tuple, dict[str, Any] | None] = {}  # reference key -> the rung that ran, or None: cannot move


def _batch(name: str) -> bool:
    return name.lower() in BATCH_NAMES or name.lower().startswith("batch")


def rungs(source: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidate shape sets, boldest first; each is the overrides with some constants moved (the bolder two
    without the tuple overrides, so that a tuple derived from the moved constants follows them)."""
    values = {**integer_constants(source), **{k: v for k, v in overrides.items() if type(v) is int}}
    batch = {k: (v - 1 if v > 2 else v + 1) for k, v in values.items() if _batch(k) and v > 0}
    odd = {k: (3 * v // 4) | 1 for k, v in values.items() if not _batch(k) and v >= 16}
    by_eight = {k: (3 * values[k] // 4) // 8 * 8 for k in odd}
    by_eight = {k: (v + 8 if v % 16 == 0 else v) for k, v in by_eight.items()}
    ints = {k: v for k, v in overrides.items() if type(v) is int}  # tuple overrides are left to follow (derived)
    out = []
    for base, moved in ((ints, {**odd, **batch}), (ints, {**by_eight, **batch}), (overrides, batch)):
        shapes = {**base, **moved}
        if moved and shapes != overrides and shapes not in out:
            out.append(shapes)
    return out


CANNOT_MOVE = ("the task's constants cannot move: the reference fails at every second shape set derived from them, "
               "or none of them is a size, so a candidate with its shapes written into the source is not caught")


def second_reference(referee: Referee, task: dict, deadline: float) -> tuple[Any, dict[str, Any] | None]:
    """The reference runner at the second shape set (the first rung that loads, builds and draws), and its
    shapes; (None, None) when the constants cannot move. Remembered per task; the probe asks first."""
    key = (task["module"], tuple(sorted((k, str(v)) for k, v in task["shapes"].items())))
    if key in _moved and _moved[key] is None:
        return None, None
    for shapes in ([_moved[key]] if key in _moved else rungs(task["source"], task["shapes"])):
        try:
            ref2 = referee.reference({**task, "shapes": shapes}, deadline)
            referee.call_ref(ref2, {"op": "build", "seed": 0}, deadline, "building the reference")
            referee.call_ref(ref2, {"op": "make", "seeds": [0], "key": "probe"}, deadline,
                             "running the reference at the second shape set")
            referee.settle(ref2)  # lets go of the draw, and accounts its memory
        except ReferenceFailure:
            continue
        _moved[key] = shapes
        return ref2, shapes
    _moved[key] = None
    return None, None


def check_second_shape_set(ev: Judging) -> None:
    """After the candidate passed at the task's shapes: one trial at the second shape set (a failure goes in
    `ev.out`, naming the set); `ev.fidelity['second_shape_set']` says what ran."""
    if ev.set_bytes >= MAX_SET_BYTES:
        ev.fidelity["second_shape_set"] = "skipped: sets of 1 GiB and more (a second reference beside the first)"
        return
    ref2, shapes = second_reference(ev.referee, ev.req["task"], ev.deadline)
    if ref2 is None:
        ev.fidelity["second_shape_set"] = f"none: {CANNOT_MOVE}"
        return
    ev.fidelity["second_shape_set"] = {k: list(v) if isinstance(v, tuple) else v for k, v in shapes.items()}
    seed = fresh_seed()
    main = ev.ref
    try:
        built, _ = ev.referee.call_ref(ref2, {"op": "build", "seed": seed}, ev.deadline, "building the reference")
        reply, _ = ev.cand_call({"op": "build", "seed": seed, "init_inputs": ref2.init_inputs, "stash": True},
                                ref2.init_buffers)
        answer = BuildAnswer.parse(reply)
        if answer.failure is not None:
            ev.out.error(answer.failure)
            _name_the_set(ev)
            return
        ev.ref = ref2
        perturb_both(ev, seed, built.get("state"), answer.state, report_as="perturbation_second_set")
        if ev.out.fields.get("lineup") == "copied_by_name":  # the line-up the task's shapes needed
            ev.copy_reference_parameters()
        mismatch = ev.trial_batch(ev.limits.trials, 1, ev.limits.trials, seeds=[fresh_seed()])
        if mismatch is not None:
            ev.out.fail(Verdict.mismatch, mismatch={**mismatch, "shape_set": "second"},
                        trials=ev.limits.trials + 1)
        elif ev.out.done:
            _name_the_set(ev)
        if not ev.out.done:
            ev.cand_call({"op": "unstash"})  # the model judged at the task's shapes, for the timing
            # what it compiled for these shapes too: a later run of the same source does not compile them again
            ev.referee.keep_kernels(ev.cand, ev.module, ev.deadline)
    finally:
        ev.ref = main
        ev.referee.settle(ref2)


def _name_the_set(ev: Judging) -> None:
    error = ev.out.fields.get("error")
    if isinstance(error, dict):
        error["message"] = ("at the second shape set (the task's constants moved: " +
                            ", ".join(f"{k}={v}" for k, v in ev.fidelity["second_shape_set"].items()) + "): " +
                            str(error.get("message") or ""))[:400]
    rejected = ev.out.fields.get("rejected")
    if isinstance(rejected, dict):
        rejected["message"] = ("at the second shape set: " + str(rejected.get("message") or ""))[:400]
