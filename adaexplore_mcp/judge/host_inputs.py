"""A task's inputs that are not tensors (a scale drawn by `get_inputs()`, a dimension): the replay's inputs
keep the replayed trial's.

The replay (replay/run.py) runs the call's record on new inputs: new tensors, but every value the candidate's code
took from a Python number is in the record as it was (a kernel argument `alpha`, or `alpha * 2`: no value can
be followed through Python arithmetic). When `get_inputs()` draws such a number at random, new inputs with a
new number made an honest kernel compute the "wrong" result. So the reference draws
the replay's sets with the replayed trial's numbers in place of its own; the tensors are new.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_SCALARS = (bool, int, float, str)


def host_values(inputs: list[Any]) -> list[Any]:
    """The inputs that are plain numbers or strings (None for the others): what the replay's sets keep."""
    return [x if type(x) in _SCALARS and not (isinstance(x, float) and not math.isfinite(x)) else None
            for x in inputs]


def on_device(inputs: list[Any], device: str, keep: Any = None) -> list[Any]:
    """A drawn set on the device, with `keep` (a `host_values` list, sent by the referee) in place of its
    numbers of the same type."""
    values = keep if isinstance(keep, list) and len(keep) == len(inputs) else [None] * len(inputs)
    return [x.to(device) if isinstance(x, torch.Tensor) else
            v if v is not None and type(v) is type(x) and type(x) in _SCALARS else x
            for x, v in zip(inputs, values)]


__all__ = ["host_values", "on_device"]
