"""Did the candidate's kernels only move a result PyTorch computed? The replay's capture run says.

The replay (replay.py) checks that the output depends on what the candidate's kernels write. A kernel that
copies a PyTorch result into the output defeats that, because the output then "depends" on the copy although
the kernel did none of the work. This is the likeliest form of the hack (a model computes in PyTorch and adds
a copy kernel to satisfy "a Triton kernel launched"), so the replay's capture run is traced, in the replay's
process, where the candidate cannot see it. Every storage has an origin:

- `known`: it existed before the call (inputs, parameters, buffers);
- `pytorch`: PyTorch operators made it inside `forward` (anything not known and not written by a kernel);
- `kernel`: a candidate kernel computed it;
- `moved`: a candidate kernel wrote it, and what it wrote equals a `pytorch` or `moved` tensor among that
  launch's arguments bit for bit (also through a view of another dtype, or from another range of the same
  storage). Moving a moved result again stays `moved` (two hops; a copy before or after a token launch).

Only what a launch really changed counts as written (the capture run compares each argument's memory before
and after the launch): a no-op launch on a PyTorch result changes nothing. When the output's storage ends
`moved`, the kernels only moved PyTorch's work into it.

Not flagged: copies of an input (the task is then an identity, which the degenerate-task warning covers),
copies between the candidate's own kernels' results, and work split between PyTorch and a kernel that does
some of the arithmetic (library operators are allowed: docs/judge.md, known limits). A copy of part of a
larger PyTorch tensor, or of its values in another order, is not recognised either (a permutation rule would
also flag legitimate data-movement kernels fed by `.contiguous()`). An output that is part of what a kernel
wrote is compared with every PyTorch-made tensor passed to a launch: a copy into a larger buffer is a copy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .compare import MAX_NESTING, as_tensors
from .wire import span_bytes


MAX_SOURCES = 64


def storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def launch_tensors(args: Any, kwargs: dict) -> list[torch.Tensor]:
    """Every tensor a launch is given, in argument order: at the top level and inside tuples, lists and Triton's
    host-side descriptors (a TensorDescriptor's `base`). A kernel writes through all of them: one that copied
    PyTorch's result through a tensor in a tuple was neither captured nor seen by the copy check (red team,
    round seven)."""
    found: list[torch.Tensor] = []

    def walk(v: Any, depth: int) -> None:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif depth < MAX_NESTING and isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)
        elif depth < MAX_NESTING and dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name, None), depth + 1)

    for a in [*args, *kwargs.values()]:
        walk(a, 0)
    return found


def written_by(op: Any, args: Any, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an ATen operator writes in place or into `out=` (its schema's mutable arguments)."""
    schema = getattr(op, "_schema", None)
    written: list[torch.Tensor] = []
    for i, a in enumerate(getattr(schema, "arguments", ())):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        written += launch_tensors([value], {})
    return written


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes of its storage a view reaches, [start, end)."""
    start = t.storage_offset() * t.element_size()
    return start, span_bytes(list(t.shape), list(t.stride()), t.storage_offset(), t.element_size())


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if storage_key(a) != storage_key(b):
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def moved_from(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether `dst` holds `src`'s values: its bytes (any dtype of the same byte size, any non-overlapping range
    of one storage), or its values converted to `dst`'s dtype (a kernel that only narrows float64 to float32).
    Constant tensors (one distinct value) never count: zero-filling is not a copy."""
    if dst.device != src.device or dst.numel() < 2 or _overlap(dst, src):
        return False
    rows = _flat_bytes(dst).view(dst.numel(), dst.element_size())
    if not bool((rows != rows[0]).any()):
        return False
    if dst.numel() * dst.element_size() == src.numel() * src.element_size() and \
            torch.equal(rows.reshape(-1), _flat_bytes(src)):
        return True
    same_kind = dst.is_floating_point() == src.is_floating_point() and not dst.is_complex() and not src.is_complex()
    return dst.numel() == src.numel() and dst.dtype != src.dtype and same_kind and dst.dtype != torch.bool and \
        torch.equal(src.reshape(-1).to(dst.dtype), dst.reshape(-1))


class CopyTrace:
    """Call `after(kernel, args, kwargs, written)` after each launch of one run (`written`: the storages the
    launch changed, or None when unknown: then every argument counts as written), then ask
    `pytorch_copy(result)`. `known`: the tensors that existed before the call."""

    def __init__(self, known: list[Any]) -> None:
        self.origin: dict[int, str] = {storage_key(t): "known" for t in as_tensors(known) if isinstance(t, torch.Tensor)}
        self.mover: dict[int, str] = {}  # storage -> the kernel that moved a PyTorch result into it
        self.sources: list[tuple[str, torch.Tensor]] = []  # PyTorch-made arguments of launches, for the output
        self.moved: list[tuple[str, torch.Tensor]] = []  # what kernels only moved, for outputs PyTorch made from it

    def after(self, kernel: Any, args: Any, kwargs: dict, written: set[int] | None = None) -> None:
        tensors = launch_tensors(args, kwargs)
        name = getattr(getattr(kernel, "fn", None), "__name__", "?")
        before = {storage_key(t): self.origin.get(storage_key(t), "pytorch") for t in tensors}
        for dst in tensors:
            key = storage_key(dst)
            if (key not in written) if written is not None else before[key] == "known":
                continue  # not written (or, when writes are unknown, an input or parameter passed along)
            sources = [s for s in tensors if s is not dst and before[storage_key(s)] in ("pytorch", "moved")]
            if len(self.sources) < MAX_SOURCES:
                self.sources += [(name, s) for s in sources if not any(s is t for _, t in self.sources)]
            if any(moved_from(dst, s) for s in sources):
                self.origin[key], self.mover[key] = "moved", name
                if len(self.moved) < MAX_SOURCES:
                    self.moved.append((name, dst))
            else:
                self.origin[key] = "kernel"
                self.mover.pop(key, None)

    def pytorch_wrote(self, op: Any, args: Any, kwargs: dict) -> None:
        """After an ATen operator: what it wrote in place (`add_`, `out=`, `copy_`) is PyTorch's now, whoever
        made the memory: a result PyTorch computed into a buffer made before the call, or into one a kernel
        had zeroed, then moved by a kernel, is a copy too (red team, round seven)."""
        for t in written_by(op, args, kwargs):
            key = storage_key(t)
            self.origin[key] = "pytorch"
            self.mover.pop(key, None)

    def pytorch_copy(self, result: Any) -> str | None:
        """The kernel that only moved a PyTorch result into an output, or None."""
        for out in as_tensors(result):
            if not isinstance(out, torch.Tensor):
                continue
            origin = self.origin.get(storage_key(out))
            if origin == "moved":
                return self.mover.get(storage_key(out), "?")
            # Part of what a kernel wrote (a larger buffer) is compared alone; what PyTorch made after the kernels
            # (`.clone()`, `+ 0` of a moved result) is compared with what they moved.
            for name, src in self.sources if origin == "kernel" else self.moved:
                if moved_from(out, src):
                    return name
        return None


__all__ = ["CopyTrace", "launch_tensors", "moved_from", "storage_key", "written_by"]
