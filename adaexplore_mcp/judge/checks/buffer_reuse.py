"""Runner side of the reused-buffer trial (trial_plan.py): a decoy call on the trial's own input buffers.

Answers an output cache keyed on an input's address (`x.data_ptr()`), or on anything else a buffer keeps
between calls: no call of the plain trials ever reuses an input buffer with new values in it, so such a cache
is never wrong there. Here the trial's buffers first hold the same values in another order (a decoy: still
in the inputs' domain, indices stay indices), the candidate is called on them and that output is discarded;
then the trial's values are put back, bit for bit, into the same buffers and the real call is made. A cache
answers the second call with the decoy's output, which the referee finds wrong. The buffers are restored
before the referee looks at them, so a decoy call that wrote its inputs is not held against the real one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _decoy(x: torch.Tensor) -> torch.Tensor:
    """The same values in another order (a roll of the flattened tensor by about a third of it)."""
    flat = x.reshape(-1)
    return flat.roll(max(1, flat.numel() // 3)).reshape(x.shape)


def with_decoy_first(inputs: list[Any], call: Callable[[list[Any]], tuple[Any, dict]]) -> dict | None:
    """Run `call` once on `inputs` holding decoy values, then restore them. None when that call succeeded
    (or no input could hold a decoy); else its failure reply, which is the candidate's."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor) and x.numel() > 1]
    if not tensors:
        return None
    with torch.no_grad():
        saved = [x.clone() for x in tensors]
        for x in tensors:
            x.copy_(_decoy(x))
    try:
        _, reply = call(inputs)
    finally:
        with torch.no_grad():
            for x, kept in zip(tensors, saved):
                x.copy_(kept)
    return reply if "verdict" in reply else None
