"""The verdict's spine: every check of one evaluation, in the order it runs (evaluation.py walks this list).

Each check is a function over the one evaluation context (context.py) that returns nothing, or records a
failure in `ev.out`; the first failure ends the evaluation. Each module's docstring names the shortcut it
answers. Before this list, in the server: the source's size, syntax and ModelNew (api.py); around it, in the
referee: runners taken and given back, a runner that dies or misses its deadline (evaluation.evaluate).

  load              construction.py     the candidate imported in its own runner
  build             construction.py     both models under one seed; constant parameters perturbed alike
  trials            trials.py           per trial (correctness.py): error, no kernel launched, aliasing,
                                        input mutation, mismatch; float64 precision on the first
                                        (measured_precision.py); the plan's roles (trial_plan.py,
                                        buffer_reuse.py, off_distribution.py); the replay sent (work.py)
  source_precision  source_precision.py what the source computes below the task's dtype
  work              work.py             the replay: the work is the candidate's kernels'
  second_shape_set  second_shapes.py    one trial at shapes the source never saw
  timing            timing.py           GPU: timed blocks and their guards
  roofline          roofline.py         GPU: faster than the hardware allows; then the speedups
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .construction import build_models, load_candidate
from .context import Judging
from .roofline import check_faster_than_hardware
from .second_shapes import check_second_shape_set
from .source_precision import report_source_precision
from .timing import time_on_gpu
from .trials import run_trials
from .work import check_work

Check = Callable[[Judging], None]


@dataclass(frozen=True)
class Step:
    """One check in the spine: its name, the function, whether it runs on a GPU only, the progress reported as it
    starts (when the function reports none itself), and the stage its time is reported under when the function
    does not mark its own (`stages_ms`)."""

    name: str
    check: Check
    gpu_only: bool = False
    progress: tuple[float, str] | None = None
    mark: str | None = None


PIPELINE: tuple[Step, ...] = (
    Step("load", load_candidate, progress=(0.1, "compiling: importing the candidate")),
    Step("build", build_models),
    Step("trials", run_trials),
    Step("source_precision", report_source_precision),
    Step("work", check_work),
    Step("second_shape_set", check_second_shape_set, progress=(0.72, "checking at a second, unseen shape set"),
         mark="fidelity_after_pass"),
    Step("timing", time_on_gpu, gpu_only=True, progress=(0.75, "timing")),
    Step("roofline", check_faster_than_hardware, gpu_only=True),
)


def run_pipeline(ev: Judging, steps: tuple[Step, ...] = PIPELINE) -> None:
    """Run `steps` in order until one records a failure (GPU-only steps only on a GPU)."""
    for step in steps:
        if step.gpu_only and ev.device != "cuda":
            continue
        if step.progress is not None:
            ev.progress(*step.progress)
        step.check(ev)
        if step.mark is not None:
            ev.mark(step.mark)
        if ev.out.done:
            return
