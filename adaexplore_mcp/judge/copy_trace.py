"""Did the candidate's kernel only copy a result PyTorch computed? The replay's first run says.

The replay (replay.py) runs a recorded forward call once more with the candidate's launches skipped and
rejects it when the output still matches: work done next to a token kernel. A kernel that copies a PyTorch
result into the output defeats that check, because skipping the copy leaves the output unwritten (NaN): the
output "depends" on the kernel although the kernel did none of the work. This is the likeliest form of the
hack (a model computes in PyTorch and adds a copy kernel to satisfy "a Triton kernel launched"), so the
replay's run as recorded is traced, in the replay's process, where the candidate cannot see it:

- after each launch of a candidate kernel, any two of its tensor arguments with the same dtype and number of
  elements, different storage and more than one distinct value, that are bit-for-bit equal make it a copy
  between them;
- the output was last touched by such a copy, and the other side of it was made inside `forward` by PyTorch:
  not an input, not a parameter or buffer of the model, not passed to any earlier launch of the candidate's
  kernels.

In-place work (one tensor argument), copies of an input (the task itself is then an identity, which the
degenerate-task warning covers) and copies between the candidate's own kernels' results are not flagged.
Work split between PyTorch and a kernel that does some of the arithmetic (a copy that also adds zero in
another way) is not a copy: library operators are allowed, so that is reported (docs/judge.md, known
limits), not rejected.
"""

from __future__ import annotations

from typing import Any

import torch

from .compare import as_tensors


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _tensors(args: Any, kwargs: dict) -> list[torch.Tensor]:
    return [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]


def _copies(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    """Pairs of storages whose tensors are bit-for-bit equal and not constant (a copy, either way)."""
    pairs = []
    for i, a in enumerate(tensors):
        for b in tensors[i + 1:]:
            if (a.dtype != b.dtype or a.numel() != b.numel() or a.numel() < 2 or a.device != b.device
                    or _storage(a) == _storage(b)):
                continue
            fa, fb = a.reshape(-1), b.reshape(-1)
            if bool((fa != fa[0]).any()) and torch.equal(fa, fb):
                pairs.append((_storage(a), _storage(b)))
    return pairs


class CopyTrace:
    """Call `after` after each launch of one run, then ask `pytorch_copy(result)`. `known`: the tensors that
    existed before the call (inputs, parameters, buffers)."""

    def __init__(self, known: list[Any]) -> None:
        known = [t for t in as_tensors(known) if isinstance(t, torch.Tensor)]
        self.seen = {_storage(t) for t in known}  # storages PyTorch inside forward did not make
        self.last: dict[int, tuple[str, int | None]] = {}  # storage -> (kernel, the PyTorch-made side it copied)
        # an autotuner launches the same kernel on the same storages once per benchmark run: compare once
        self._checked: dict[tuple, list[tuple[int, int]]] = {}

    def after(self, kernel: Any, args: Any, kwargs: dict) -> None:
        tensors = _tensors(args, kwargs)
        name = getattr(getattr(kernel, "fn", None), "__name__", "?")
        key = (name, *(_storage(t) for t in tensors))
        copies = self._checked.get(key)
        if copies is None:
            copies = self._checked[key] = _copies(tensors)
        for t in tensors:
            ptr = _storage(t)
            peers = [b if a == ptr else a for a, b in copies if ptr in (a, b)]
            made_by_pytorch = [p for p in peers if p not in self.seen]
            self.last[ptr] = (name, made_by_pytorch[0] if made_by_pytorch else None)
        self.seen.update(_storage(t) for t in tensors)

    def pytorch_copy(self, result: Any) -> str | None:
        """The kernel that only copied a PyTorch result into an output, or None."""
        for out in as_tensors(result):
            if isinstance(out, torch.Tensor):
                name, source = self.last.get(_storage(out), (None, None))
                if source is not None:
                    return name
        return None


__all__ = ["CopyTrace"]
