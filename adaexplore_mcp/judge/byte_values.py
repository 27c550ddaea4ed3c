"""What the copy trace counts as the same values: bytes, numbers up to the sign of a zero, constants, and the runs
of bytes a launch changed. Pure functions of tensors, shared by the copy trace (copy_trace.py) and the replay
(replay.py), which measure a launch's writes with them.
"""

from __future__ import annotations

import math

import torch

from .wire import span_bytes

_FLOAT_OF_SIZE = {2: torch.float16, 4: torch.float32, 8: torch.float64}


def storage_key(t: torch.Tensor) -> int:
    """The memory a tensor is a view of, by its address (views of one storage share it)."""
    return t.untyped_storage().data_ptr()


def view_span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes of its storage a view reaches, [start, end)."""
    start = t.storage_offset() * t.element_size()
    return start, span_bytes(list(t.shape), list(t.stride()), t.storage_offset(), t.element_size())


def flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's elements in row-major order, as bytes."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def moved_from(region: torch.Tensor, dtype: torch.dtype, src: torch.Tensor) -> bool:
    """Whether the bytes a launch changed (`region`, of a `dtype` storage) hold `src`'s values: its bytes (any dtype
    of the same byte size), its values up to the sign of a zero or a NaN's payload (a kernel that turned PyTorch's
    +0.0 into -0.0 changed no value: red team, round thirteen), or its values converted to `dtype` (a kernel that
    only narrows float64 to float32, or turns PyTorch's float argmax into int64: round ten). Constant values (one
    distinct value) never count: zero-filling is not a copy."""
    size = dtype.itemsize
    if region.device != src.device or region.numel() < 2 * size or region.numel() % size or \
            region.storage_offset() % size:
        return False
    if trivial_bytes(region, dtype):
        return False
    if region.numel() == src.numel() * src.element_size() and torch.equal(region, flat_bytes(src)):
        return True
    if region.numel() // size != src.numel() or dtype.is_complex or src.is_complex():
        return False
    if dtype == src.dtype:
        # a float's bits moved as integers (round fourteen): -0.0 for 0.0 is no work either
        as_float = dtype if dtype.is_floating_point else _FLOAT_OF_SIZE.get(size)
        return as_float is not None and same_values(region.view(as_float), src.reshape(-1).view(as_float))
    return torch.equal(src.reshape(-1).to(dtype), region.view(dtype))


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal as numbers, a NaN equal to a NaN (`torch.equal` takes -0.0 for 0.0 but no NaN for a NaN)."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def canonical(t: torch.Tensor) -> torch.Tensor:
    """A float tensor with every zero +0.0 and every NaN one NaN, so that digests compare values, not bit patterns
    a kernel can flip without computing anything; other dtypes as they are."""
    if not t.dtype.is_floating_point or not t.numel():
        return t
    return torch.where(t.isnan(), torch.full((), float("nan"), dtype=t.dtype, device=t.device), t + 0.0)


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """All of a tensor's storage as bytes: a kernel may write anywhere in the memory of an argument."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def whole_elements(span: tuple[int, int], t: torch.Tensor) -> tuple[int, int]:
    """A byte range of `t`'s storage widened to whole elements of `t`: a byte a write left as it was may belong
    to an element it changed (0.0 over NaN changes a float's two high bytes only)."""
    size, (lo, hi) = t.element_size(), span
    return lo - lo % size, min(hi + (-hi) % size, t.untyped_storage().nbytes())


RUN_GAP, MAX_RUNS = 64, 64  # changed_runs: elements left as they were that split a write; ranges kept at most


def changed_runs(changed: torch.Tensor, itemsize: int) -> list[tuple[int, int]]:
    """The byte ranges of a storage a launch changed (`changed`: a flag per byte), in whole elements of `itemsize`,
    runs fewer than RUN_GAP elements apart joined, at most MAX_RUNS (the widest gaps split them).
    A kernel that wrote the two ends of an output PyTorch filled in between did not compute the middle (red team,
    round thirteen), which one range from the first change to the last said it did."""
    pad = (-changed.numel()) % itemsize
    flags = torch.cat([changed, changed.new_zeros(pad)]).view(-1, itemsize).any(1) if pad else \
        changed.view(-1, itemsize).any(1)
    at = flags.nonzero().flatten()
    if not at.numel():
        return []
    gaps = at[1:] - at[:-1]
    breaks = (gaps >= RUN_GAP).nonzero().flatten()
    if breaks.numel() >= MAX_RUNS:  # the widest gaps split it: many small writes far apart claim no more
        breaks = breaks[gaps[breaks].topk(MAX_RUNS - 1).indices].sort().values
    starts = [int(at[0]), *(int(at[b + 1]) for b in breaks.tolist())]
    ends = [*(int(at[b]) + 1 for b in breaks.tolist()), int(at[-1]) + 1]
    return [(a * itemsize, min(b * itemsize, changed.numel())) for a, b in zip(starts, ends)]


MAX_VIEW_BLOCKS = 1 << 16  # view_ranges: contiguous blocks listed at most


def view_ranges(t: torch.Tensor) -> list[tuple[int, int]]:
    """The byte ranges of its storage a view's elements occupy, in order, apart; its span (`view_span`: its first
    byte to its last) where they fill it or would take more than MAX_VIEW_BLOCKS ranges. A column slice is its
    rows: PyTorch writing `out[:, :16]` wrote 16 elements of each row, not the kernel's columns between them
    (round fourteen), and reading it reads those, not the gaps (round fifteen)."""
    size, inner, dims, span = t.element_size(), 1, t.dim(), view_span(t)
    if not t.numel() or t.numel() * size >= span[1] - span[0]:
        return [span]  # dense (a transpose, a permutation) or overlapping: nothing between its elements
    while dims and (t.stride(dims - 1) == inner or t.shape[dims - 1] == 1):  # the contiguous innermost dimensions
        inner *= t.shape[dims - 1]
        dims -= 1
    if not dims or math.prod(t.shape[:dims]) > MAX_VIEW_BLOCKS:
        return [span]
    starts = torch.tensor([t.storage_offset()], dtype=torch.int64)
    for n, stride in zip(t.shape[:dims], t.stride()[:dims]):
        starts = (starts[:, None] + torch.arange(n, dtype=torch.int64) * stride).reshape(-1)
    starts = torch.unique(starts)  # sorted
    ends = starts + inner
    if starts.numel() > 1:  # blocks that touch or overlap their predecessor's reach are one range
        reach = torch.cummax(ends, 0).values
        opens = torch.cat([torch.ones(1, dtype=torch.bool), starts[1:] > reach[:-1]])
        first = opens.nonzero().flatten()
        last = torch.cat([first[1:] - 1, torch.tensor([starts.numel() - 1])])
        starts, ends = starts[first], reach[last]
    return [(int(a) * size, int(b) * size) for a, b in zip(starts.tolist(), ends.tolist())]


def trivial_bytes(data: torch.Tensor, dtype: torch.dtype) -> bool:
    """`trivial` for bytes of a `dtype` storage (a range a launch wrote, a part of an output)."""
    size = dtype.itemsize
    if data.numel() % size or data.storage_offset() % size or not data.numel():
        return data.numel() == 0
    return trivial(data.view(dtype))


def is_zero(t: torch.Tensor) -> bool:
    """One element that is zero: a kernel's value times zero, or minus itself (red team, round fourteen)."""
    return t.numel() == 1 and not t.is_complex() and float(t.reshape(-1)[0]) == 0.0


def trivial(t: torch.Tensor) -> bool:
    """Equal to a PyTorch result by chance rather than by copy: one value everywhere (zero-filling is not a copy),
    or a single element that is 0, 1, -1 or not finite."""
    if t.numel() == 0:
        return True
    rows = flat_bytes(canonical(t)).view(t.numel(), t.element_size())  # -0.0 beside 0.0 is one value
    if t.numel() > 1:
        return not bool((rows != rows[0]).any())
    if t.is_complex() or t.dtype == torch.bool:
        return True
    v = float(t.reshape(-1)[0])
    return v in (0.0, 1.0, -1.0) or not math.isfinite(v)


__all__ = ["MAX_RUNS", "RUN_GAP", "canonical", "changed_runs", "flat_bytes", "is_zero", "moved_from", "same_values",
           "storage_bytes", "storage_key", "trivial", "trivial_bytes", "view_ranges", "view_span", "whole_elements"]
