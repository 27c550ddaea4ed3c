"""Does a PyTorch operator's result depend on the values a candidate kernel computed? The copy trace asks.

A kernel's value mixed into PyTorch's arithmetic so that it has no effect (`torch.add(y, k, alpha=0)`,
`y + k * 1e-30`, `torch.maximum(y, k - 1e6)`) made the result "derived from a kernel", and a copy kernel then
moved PyTorch's own answer into the output as the kernels' work (red team, round thirteen). The trace now runs
such an operator again on copies of its arguments, the kernel-computed ones changed, twice:

- `spread`: noise of the values' own spread (their standard deviation), which moves indices, signs and
  comparisons as much as a real change of the kernel's work would;
- `relative`: each value moved by a small fraction of itself (a few units in the last place of its dtype at
  least), for float results only: a value far below a maximum stays below it however wide the spread of the
  others (round fourteen put half the values a million below and half 1e30 below, so the spread's noise
  crossed the maximum), and a value 1e-30 of another's size stays absorbed.

A result that comes out the same, bit for bit, under either took nothing from the kernels. A random operator
runs both ways from the same generator state (the state is restored after), so its draws cancel out.

Only the replay's capture run (in the referee's replay process) calls this, once per operator that mixes a
kernel's values with others; it costs up to two more runs of those operators there, never in the timed calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .byte_values import same_values

NOISE_SEED = 0x51DE
RELATIVE = 1e-3  # the relative change, or RELATIVE_ULPS units in the last place where that is more
RELATIVE_ULPS = 4


def ignores(op: Any, args: Any, kwargs: dict, result: Any, computed: list[torch.Tensor]) -> bool:
    """Whether `op(*args, **kwargs)`, which gave `result`, gives the same with every tensor in `computed` (the
    arguments a kernel computed) changed. False whenever that cannot be told: an operator that fails on the
    copies, runs out of memory, or returns something of another kind counts as depending on them."""
    mine = _tensors(result)
    if not mine:
        return False
    scales = ["spread", "relative"] if all(t.is_floating_point() or t.is_complex() for t in mine) else ["spread"]
    return any(_unchanged(op, args, kwargs, mine, computed, how) for how in scales)


class _Swap:
    """Copies of an operator's arguments, the kernel-computed ones (`targets`, by id) noised: a class, not a
    recursive closure, whose reference cycle would keep what it saw until the collector ran (test_judge_no_cycles)."""

    def __init__(self, targets: set[int], how: str, changed: list[bool]) -> None:
        self.targets, self.how, self.changed = targets, how, changed

    def __call__(self, v: Any, depth: int = 0) -> Any:
        if isinstance(v, torch.Tensor):
            copy = v.clone()  # never the call's own memory: an `out=` buffer, an in-place operator's self
            if id(v) in self.targets:
                noisy = _noised(copy, self.how)
                self.changed.append(noisy is not copy)
                return noisy
            return copy
        if isinstance(v, (list, tuple)) and depth < 4:
            return type(v)(self(x, depth + 1) for x in v)
        return v


def _unchanged(op: Any, args: Any, kwargs: dict, mine: list[torch.Tensor], computed: list[torch.Tensor],
               how: str) -> bool:
    targets = {id(t) for t in computed}
    changed: list[bool] = []

    def run(noise: bool) -> Any:
        swap = _Swap(targets if noise else set(), how, changed)
        return op(*swap(args), **{k: swap(v) for k, v in kwargs.items()})

    if how == "relative" and not any(t.is_floating_point() or t.is_complex() for t in computed):
        return False  # integers and bools change the same way at either scale: already tried
    try:
        if torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()):
            first, again = _from_one_state(lambda: run(False), lambda: run(True))
            mine = _tensors(first)
        else:
            again = run(True)
    except (RuntimeError, TypeError, ValueError, IndexError, torch.OutOfMemoryError):
        return False
    if not changed or not all(changed):
        return False
    theirs = _tensors(again)
    return len(mine) == len(theirs) and all(_same(a, b) for a, b in zip(mine, theirs))


def _from_one_state(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """Two runs of a random operator from the random generators' state as it is now, which is restored after:
    their draws are the same, and the rest of the capture draws as recorded."""
    cpu = torch.get_rng_state()
    cuda = [(i, torch.cuda.get_rng_state(i)) for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() and torch.cuda.is_initialized() else []

    def restore() -> None:
        torch.set_rng_state(cpu)
        for i, state in cuda:
            torch.cuda.set_rng_state(state, i)

    try:
        a = first()
        restore()
        return a, second()
    finally:
        restore()


def _noised(t: torch.Tensor, how: str) -> torch.Tensor:
    """`t` (a copy) with other values, or `t` itself where they cannot be changed that way. Floats: noise of
    their spread (their standard deviation, or their magnitude where all are equal), or of their own size;
    complex numbers: both parts so; integers each moved to another value of their range; bools inverted."""
    if not t.numel():
        return t
    if t.is_complex():
        parts = torch.view_as_real(t)
        noisy = _noised(parts.clone(), how)
        return t if noisy is parts else torch.view_as_complex(noisy.contiguous())
    if t.dtype == torch.bool:
        return ~t
    generator = torch.Generator().manual_seed(NOISE_SEED)
    if not t.is_floating_point():  # each value moved within the values' range: an index stays in range, and a
        low, high = int(t.min()), int(t.max())  # set of indices changes too (a reordering left `used[ids] = True`
        if low == high:                         # as it was: round fourteen)
            return t
        step = torch.randint(1, high - low + 1, t.shape, generator=generator).to(t.device)
        return ((t.long() - low + step) % (high - low + 1) + low).to(t.dtype)
    wide = t.double()
    noise = torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device)
    if how == "relative":
        fraction = max(RELATIVE, RELATIVE_ULPS * torch.finfo(t.dtype).eps)
        noisy = (wide * (1 + noise.clamp(-3, 3) * fraction / 3)).to(t.dtype)
    else:
        spread = float(wide.std()) if t.numel() > 1 else 0.0
        if not spread or spread != spread:
            spread = float(wide.abs().mean()) or 1.0
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
    return same_values(a, b) if a.is_floating_point() or a.is_complex() else torch.equal(a, b)


__all__ = ["ignores"]
