"""Runner side of the off-distribution trial (trial_plan.py): the reference's inputs scaled and shifted.

Answers a branch dropped because the sampling distribution never reaches it: `clamp(-10, 10)` left out since
`randn` stays within it, a saturation or an overflow guard never taken. One trial's floating inputs become
`8 * x + 1` (then `2 * x + 0.5` when the reference is not finite there: a log of a negative, an exp that
overflows); where neither keeps the reference finite, the trial keeps its plain draw and says so. Integer
and boolean inputs (indices, masks) are left as drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

SCALES = ((8.0, 1.0), (2.0, 0.5))


def scaled(inputs: list[Any], scale: float, shift: float) -> list[Any]:
    """Each floating tensor as `scale * x + shift`, in a new tensor of its dtype; everything else as it is."""
    return [x * scale + shift if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _finite(result: Any) -> bool:
    outs = result if isinstance(result, (list, tuple)) else [result]
    return all(bool(torch.isfinite(o).all()) for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point())


def draw_off_distribution(inputs: list[Any], forward: Callable[[list[Any]], Any]) -> tuple[list[Any], Any, str]:
    """The inputs the trial uses, the reference's output for them, and what was done ('8*x+1', '2*x+0.5', or
    'plain: ...' when no scaling keeps the reference finite or no input is floating)."""
    if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs):
        return inputs, forward(inputs), "plain: no floating input"
    for scale, shift in SCALES:
        candidate = scaled(inputs, scale, shift)
        result = forward(candidate)
        if _finite(result):
            return candidate, result, f"{scale:g}*x+{shift:g}"
    return inputs, forward(inputs), "plain: the reference is not finite on scaled inputs"
