"""What the replay's work checks count as the same values and as a constant. Pure functions of tensors, shared by
the data flow (replay/flow.py) and the replay's capture of a launch's writes (replay/run.py)."""

from __future__ import annotations

import math

import torch


def storage_key(t: torch.Tensor) -> int:
    """The memory a tensor is a view of, by its address (views of one storage share it)."""
    return t.untyped_storage().data_ptr()


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """All of a tensor's storage as bytes: a kernel may write anywhere in the memory of an argument."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's elements in row-major order, as bytes."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def canonical(t: torch.Tensor) -> torch.Tensor:
    """A float tensor with every zero +0.0 and every NaN one NaN, so that digests compare values, not bit patterns
    a kernel can flip without computing anything; other dtypes as they are."""
    if not t.dtype.is_floating_point or not t.numel():
        return t
    return torch.where(t.isnan(), torch.full((), float("nan"), dtype=t.dtype, device=t.device), t + 0.0)


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


__all__ = ["canonical", "flat_bytes", "storage_bytes", "storage_key", "trivial"]
