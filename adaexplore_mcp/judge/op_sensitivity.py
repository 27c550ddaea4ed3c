"""Does a PyTorch operator's result depend on the values a candidate kernel computed? The copy trace asks.

A kernel's value mixed into PyTorch's arithmetic so that it has no effect (`torch.add(y, k, alpha=0)`,
`y + k * 1e-30`, `torch.maximum(y, k - 1e6)`) made the result "derived from a kernel", and a copy kernel then
moved PyTorch's own answer into the output as the kernels' work (red team, round thirteen). The trace now runs
such an operator again on copies of its arguments, the kernel-computed ones with noise of their own spread
(so a value a millionth of the others' scale gets a millionth's noise, and a value far below a maximum stays far
below it): a result that comes out the same, bit for bit, took nothing from the kernels.

Only the replay's capture run (in the referee's replay process) calls this, once per operator that mixes a
kernel's values with others; it costs one more run of those operators there, never in the timed calls.
"""

from __future__ import annotations

from typing import Any

import torch

NOISE_SEED = 0x51DE


def ignores(op: Any, args: Any, kwargs: dict, result: Any, computed: list[torch.Tensor]) -> bool:
    """Whether `op(*args, **kwargs)`, which gave `result`, gives the same with every tensor in `computed` (the
    arguments a kernel computed) changed. False whenever that cannot be told: an operator that fails on the
    copies, runs out of memory, or returns something of another kind counts as depending on them."""
    if torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()):
        return False  # a random operator run again would move the generator the rest of the capture draws from
    targets = {id(t) for t in computed}
    changed: list[bool] = []

    def swap(v: Any, depth: int = 0) -> Any:
        if isinstance(v, torch.Tensor):
            copy = v.clone()  # never the call's own memory: an `out=` buffer, an in-place operator's self
            if id(v) in targets:
                noisy = _noised(copy)
                changed.append(noisy is not copy)
                return noisy
            return copy
        if isinstance(v, (list, tuple)) and depth < 4:
            return type(v)(swap(x, depth + 1) for x in v)
        return v

    try:
        again = op(*swap(args), **{k: swap(v) for k, v in kwargs.items()})
    except (RuntimeError, TypeError, ValueError, IndexError, torch.OutOfMemoryError):
        return False
    if not changed or not all(changed):
        return False
    mine, theirs = _tensors(result), _tensors(again)
    return bool(mine) and len(mine) == len(theirs) and all(_same(a, b) for a, b in zip(mine, theirs))


def _noised(t: torch.Tensor) -> torch.Tensor:
    """`t` (a copy) with other values: floats plus noise of their spread (their standard deviation, or their
    magnitude where all are equal); integers in another order (an index stays in range); bools inverted. A
    tensor that cannot be changed that way comes back as it is."""
    if not t.numel() or t.is_complex():
        return t
    if t.dtype == torch.bool:
        return ~t
    generator = torch.Generator().manual_seed(NOISE_SEED)
    if not t.is_floating_point():
        order = torch.randperm(t.numel(), generator=generator).to(t.device)
        shuffled = t.reshape(-1)[order].reshape(t.shape)
        return t if torch.equal(shuffled, t) else shuffled
    wide = t.double()
    spread = float(wide.std()) if t.numel() > 1 else 0.0
    if not spread or spread != spread:
        spread = float(wide.abs().mean()) or 1.0
    noise = torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device)
    noisy = (wide + noise * spread).to(t.dtype)
    return t if torch.equal(noisy, t) else noisy


def _tensors(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for t in v if isinstance(t, torch.Tensor)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal in shape, dtype and every value (a NaN equal to a NaN, -0.0 to 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


__all__ = ["ignores"]
