"""The fidelity checks in the order an evaluation runs them (evaluation.py calls each stage where it is).

1. At construction, after both models are built under one seed:
   `perturbation.perturb_both`: parameters and buffers still at an initial constant perturbed alike.
2. The trials, as the plan drawn for this evaluation says (`trial_plan.draw_plan`): the replayed trial at
   random, one trial reusing its input buffers after a decoy call (`buffer_reuse`), one trial off the
   sampling distribution (`off_distribution`), the same seeds for the copied line-up.
3. On the first trial, which passed: `measured_precision.check_measured_precision`.
4. After the candidate passed the trials and the replay, before timing: AFTER_PASS, in order, each
   stopping the evaluation by recording its failure in the outcome.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import Judging
from .second_shapes import check_second_shape_set

Check = Callable[[Judging], None]

AFTER_PASS: tuple[Check, ...] = (
    check_second_shape_set,  # shapes written into the source
)


def after_pass(ev: Judging) -> None:
    """Run AFTER_PASS in order until one records a failure."""
    for check in AFTER_PASS:
        check(ev)
        if ev.out.done:
            return
