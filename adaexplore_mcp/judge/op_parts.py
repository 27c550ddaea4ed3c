"""Origins of an operator's result part by part, where its parts come from known parts of its inputs.

The copy trace (copy_trace.py) gives an operator's result one origin, computed from everything it read: a
kernel's value anywhere in an input made all of the result "derived". Two operators let a kernel's few values
vouch for PyTorch's many (red team, round fourteen): a concatenation (`torch.cat([x * 2, k])[:n]`: the slice left
the kernel's part out) and elementwise arithmetic on a buffer a kernel wrote one element of and PyTorch the rest
(`(buf + 1)[1:]`). For these, each part of the result takes the origin of the parts it was computed from.
"""

from __future__ import annotations

from typing import Any

import torch

from .byte_values import storage_key, view_ranges, view_span
from .origin_map import PURE, Origin, OriginMap, computed_from

_WORK = ("kernel", "derived")


class PartOrigins:
    """A mixin of CopyTrace: `by_parts` sets the origins of a concatenation's or an elementwise operator's result
    part by part, and returns whether it did (else the trace gives the result one origin)."""

    origins: OriginMap

    def _origin(self, t: torch.Tensor) -> Origin:
        raise NotImplementedError

    def _remember(self, t: torch.Tensor, conversions: bool = False, traced: bool = True) -> None:
        raise NotImplementedError

    def by_parts(self, op: Any, name: str, args: Any, kwargs: dict, result: Any, inputs: list[torch.Tensor]) -> bool:
        """`name`: the operator's name without its namespace (`cat`), as the trace reads it."""
        if not isinstance(result, torch.Tensor) or not result.is_contiguous() or not result.numel():
            return False
        key, span = storage_key(result), view_span(result)
        if any(storage_key(t) == key and view_span(t) != span for t in inputs):
            return False  # an input overlapping the result otherwise than as itself (in place): one origin
        if name in ("cat", "stack") and not any(storage_key(t) == key for t in inputs):
            return self._cat_parts(args, kwargs, result, stack=name == "stack")
        if torch.Tag.pointwise in getattr(op, "tags", ()):
            return self._elementwise_parts(result, inputs)
        return False

    def _cat_parts(self, args: Any, kwargs: dict, result: torch.Tensor, stack: bool) -> bool:
        """A concatenation (or a stack): each input's place in the result takes the input's origins, range by
        range where both lie end to end (round fifteen: one kernel element in a part vouched for all of it), else
        the input's as a whole (a concatenation along a later dimension, whose places are strided)."""
        parts = args[0] if args else kwargs.get("tensors")
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if not isinstance(parts, (list, tuple)) or not isinstance(dim, int) or not result.dim() or \
                any(not isinstance(t, torch.Tensor) or t.dtype != result.dtype for t in parts):
            return False
        dim %= result.dim()
        places, at = [], 0
        for t in parts:
            if stack:
                places.append(result.select(dim, at))
                at += 1
            elif t.numel():
                width = t.shape[dim] if t.dim() > dim else 0
                places.append(result.narrow(dim, at, width))
                at += width
            else:
                continue
        parts = [t for t in parts if t.numel() or stack]
        if len(places) != len(parts) or any(p.shape != t.shape for p, t in zip(places, parts)):
            return False
        pieces = [self._pieces(t, place) for t, place in zip(parts, places)]
        if not _mixed({o.kind for piece in pieces for _, _, o in piece}):
            return False  # one kind of origin: the whole result is that (remembered, or an input's move)
        key = storage_key(result)
        for piece in pieces:
            for lo, hi, origin in piece:
                self.origins.set(key, lo, hi, origin)
        return True

    def _pieces(self, src: torch.Tensor, place: torch.Tensor) -> list[tuple[int, int, Origin]]:
        """The origins a copy of `src` into `place` (a view of the result) gives the bytes of `place`."""
        lo, hi = view_span(src)
        dst_lo, _ = view_span(place)
        if src.is_contiguous() and place.is_contiguous():
            return [(dst_lo + a - lo, dst_lo + b - lo, o) for a, b, o in self.origins.parts(storage_key(src), lo, hi)]
        origin = self._origin(src)
        return [(a, b, origin) for a, b in view_ranges(place)]

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
