"""Origins of an operator's result part by part, where its parts come from known parts of its inputs.

The copy trace (copy_trace.py) gives an operator's result one origin, computed from everything it read: a
kernel's value anywhere in an input made all of the result "derived". Two operators let a kernel's few values
vouch for PyTorch's many (red team, round fourteen): a concatenation (`torch.cat([x * 2, k])[:n]`: the slice left
the kernel's part out) and elementwise arithmetic on a buffer a kernel wrote one element of and PyTorch the rest
(`(buf + 1)[1:]`). For these, each part of the result takes the origin of the parts it was computed from.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .byte_values import storage_key, view_span
from .origin_map import KNOWN, PURE, Origin, OriginMap, computed_from

_WORK = ("kernel", "derived")


class PartOrigins:
    """A mixin of CopyTrace: `by_parts` sets the origins of a concatenation's or an elementwise operator's result
    part by part, and returns whether it did (else the trace gives the result one origin)."""

    origins: OriginMap

    def _origin(self, t: torch.Tensor) -> Origin:
        raise NotImplementedError

    def _remember(self, t: torch.Tensor, conversions: bool = False, traced: bool = True) -> None:
        raise NotImplementedError

    def by_parts(self, op: Any, args: Any, kwargs: dict, result: Any, inputs: list[torch.Tensor]) -> bool:
        if not isinstance(result, torch.Tensor) or not result.is_contiguous() or not result.numel() or \
                storage_key(result) in {storage_key(t) for t in inputs}:
            return False  # a view or an in-place result: one origin, as before
        name = getattr(getattr(op, "_schema", None), "name", "").split("::")[-1]
        if name == "cat":
            return self._cat_parts(args, kwargs, result)
        if torch.Tag.pointwise in getattr(op, "tags", ()):
            return self._elementwise_parts(result, inputs)
        return False

    def _cat_parts(self, args: Any, kwargs: dict, result: torch.Tensor) -> bool:
        """A concatenation whose parts lie end to end (along its first dimension of more than one element): each
        part keeps its input's origin."""
        parts = args[0] if args else kwargs.get("tensors")
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if not result.dim() or not isinstance(parts, (list, tuple)) or not isinstance(dim, int) or \
                any(not isinstance(t, torch.Tensor) or t.dtype != result.dtype for t in parts) or \
                math.prod(result.shape[:dim % result.dim()]) != 1:
            return False
        kinds = {self._origin(t).kind for t in parts if t.numel()}
        if not _mixed(kinds):
            return False  # one kind of origin: the whole result is that (remembered, or an input's move)
        key, at = storage_key(result), result.storage_offset() * result.element_size()
        for t in parts:
            size = t.numel() * result.element_size()
            self.origins.set(key, at, at + size, self._origin(t) if size else KNOWN)
            at += size
        return True

    def _elementwise_parts(self, result: torch.Tensor, inputs: list[torch.Tensor]) -> bool:
        """An elementwise operator whose inputs are one element or laid out as its result: each run of elements
        takes what it was computed from (the one-element inputs' origins, and each full input's there)."""
        full = [t for t in inputs if t.numel() > 1]
        if not full or any(t.shape != result.shape or not t.is_contiguous() for t in full):
            return False
        scalars = [self._origin(t) for t in inputs if t.numel() <= 1]
        runs = []  # per full input: (first element, end, origin), in order
        for t in full:
            lo, hi = view_span(t)
            size = t.element_size()
            runs.append([((a - lo) // size, -(-(b - lo) // size), o)
                         for a, b, o in self.origins.parts(storage_key(t), lo, hi)])
        cuts = sorted({0, result.numel(), *(a for parts in runs for a, _, _ in parts)})
        pieces, at = [], [0] * len(runs)
        for a, b in zip(cuts, cuts[1:]):
            here = list(scalars)
            for i, parts in enumerate(runs):
                while at[i] + 1 < len(parts) and parts[at[i]][1] <= a:
                    at[i] += 1
                here.append(parts[at[i]][2])
            pieces.append((a, b, computed_from(here)))
        if len({o for _, _, o in pieces}) < 2:
            return False  # one origin for all of it: the trace's own rules (the operator's sensitivity) decide
        key, size = storage_key(result), result.element_size()
        base, flat = result.storage_offset() * size, result.reshape(-1)
        for a, b, origin in pieces:
            self.origins.set(key, base + a * size, base + b * size, origin)
            if origin.kind in PURE:
                self._remember(flat[a:b])
        return True


def _mixed(kinds: set[str]) -> bool:
    """Some parts a kernel's work and some not: only then do parts need origins of their own."""
    return bool(kinds & set(_WORK)) and not kinds <= set(_WORK)


__all__ = ["PartOrigins"]
