"""What the replay's runs share: each run gets aliases of its own of the inputs, no run may change anything lent,
and memory no operator wrote is filled.

Why: the replay's checks compare runs that must not be able to tell each other apart (the run as recorded must
compute the result, the run with the kernels' writes substituted must not). The lent inputs are not copied for
each run (a large task's fill the device), so a forged program that changed them kept state from one run to
the next: `unsqueeze_` on an input slot (its shape, which a later `squeeze`/`mean` read), or `neg_` once per run
(its values), made the checked run wrong and the full run right, and a PyTorch-only candidate passed. Each run now
binds fresh tensor objects over the same memory (a change of shape or strides stays in
that run), and before each run, and after the last, the inputs' values are checked unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..compare import MAX_NESTING, flat_tensors
from .kernels import ReplayError
from ..tensor_digest import tensor_digest


def _aliases(value: Any, depth: int = 0) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()  # a new tensor object over the same memory: its own shape, strides and offset
    if isinstance(value, (list, tuple)) and depth < MAX_NESTING:
        return type(value)(_aliases(v, depth + 1) for v in value)
    return value


def _whole_storage(t: torch.Tensor) -> torch.Tensor:
    """Every byte of `t`'s storage: on a GPU the lent sets are views of one packed buffer (wire.Packer), whose
    padding and the constants' originals a run could write through an absolute offset."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


class LentInputs:
    """What was lent to one replay (input sets, constants); `fresh(inputs)` before every run, `check()` after the
    last. Each storage is digested whole, once."""

    def __init__(self, *sets: Any) -> None:
        self.tensors = [t for s in sets if s is not None for t in flat_tensors(s)]
        storages: dict[tuple, torch.Tensor] = {}
        for t in self.tensors:
            storages.setdefault((t.device, t.untyped_storage().data_ptr()), t)
        self.storages = list(storages.values())
        self.marks = self._marks()

    def _marks(self) -> list[tuple]:
        shapes = [(tuple(t.shape), t.stride(), t.storage_offset(), t.dtype) for t in self.tensors]
        return shapes + [(t.untyped_storage().nbytes(), tensor_digest(_whole_storage(t))) for t in self.storages]

    def check(self) -> None:
        if self._marks() != self.marks:
            raise ReplayError("the program changed memory it was lent (an input's or a constant's values, shape "
                              "or strides) during a run; a forward call must leave its inputs as they are")

    def fresh(self, inputs: Any) -> list[Any]:
        """Aliases of `inputs` for the next run, once the runs before it are shown to have changed nothing."""
        self.check()
        return list(_aliases(inputs))


# Memory no operator wrote: what these return (and the part a resize adds) is filled, besides PyTorch's own
# deterministic fill in the replay's process (run.py, `op_replay_prepare`), so no run reads what another left.
EMPTY_OPS = frozenset({"aten::empty.memory_format", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                       "aten::new_empty_strided", "aten::empty_permuted"})
RESIZE_OPS = frozenset({"aten::resize_", "aten::resize_as_"})


def plain(t: torch.Tensor, where: str) -> torch.Tensor:
    """Only dense, strided, unquantized tensors: a quantized factory's memory is not filled like torch.empty's (a
    forged program counted the replay's runs in it), and the data flow reads its bytes."""
    if t.is_quantized or t.layout != torch.strided or t.is_nested:
        raise ReplayError(f"{where} made a {'quantized' if t.is_quantized else str(t.layout)} tensor; the replay runs "
                          "dense tensors only")
    return t


def fill_unwritten(t: torch.Tensor) -> None:
    """NaN for floating point, the largest value for integers: nothing plausible a run could have left."""
    if t.is_floating_point() or t.is_complex():
        t.fill_(math.nan)
    elif t.dtype != torch.bool:
        t.fill_(torch.iinfo(t.dtype).max)
