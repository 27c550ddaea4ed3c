"""Which tensors an ATen operator or a Triton launch is given, reads and writes: what the replay's data flow
(replay/flow.py) and its capture of a launch's writes (replay/run.py) follow."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .compare import MAX_NESTING


def launch_tensors(args: Any, kwargs: dict) -> list[torch.Tensor]:
    """Every tensor a launch is given, in argument order: at the top level and inside tuples, lists and Triton's
    host-side descriptors (a TensorDescriptor's `base`), through all of which a kernel reads and writes."""
    found: list[torch.Tensor] = []
    # A loop, not a recursive closure: that closure was a reference cycle holding every tensor found (the replay's
    # lent inputs) until the collector ran, and on a GPU a replay killed before then kept them allocated.
    todo: list[tuple[Any, int]] = [(a, 0) for a in reversed([*args, *kwargs.values()])]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif depth < MAX_NESTING and isinstance(v, (list, tuple)):
            todo.extend((x, depth + 1) for x in reversed(v))
        elif depth < MAX_NESTING and dataclasses.is_dataclass(v) and not isinstance(v, type):
            todo.extend((getattr(v, f.name, None), depth + 1) for f in reversed(dataclasses.fields(v)))
    return found


def _schema_arguments(op: Any, args: Any, kwargs: dict) -> list[tuple[int, Any, Any]]:
    """(position, schema argument, value passed) for each argument of an ATen operator's schema."""
    schema = getattr(op, "_schema", None)
    return [(i, a, args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name))
            for i, a in enumerate(getattr(schema, "arguments", ()))]


def _writes(argument: Any) -> bool:
    return argument.alias_info is not None and argument.alias_info.is_write


def written_by(op: Any, args: Any, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an ATen operator writes in place or into `out=` (its schema's mutable arguments)."""
    return launch_tensors([v for _, a, v in _schema_arguments(op, args, kwargs) if _writes(a)], {})


# Operators whose tensor arguments give only a shape, a dtype or a device (`zeros_like(k)` reads nothing of k)
_SHAPE_ONLY = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                         "randint_like", "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
                         "resize_as_"})
# In-place operators that overwrite their first argument without reading it
_OVERWRITES = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"})


def read_by(op: Any, args: Any, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an ATen operator reads: all its tensor arguments but an `out=` buffer, the first argument of an
    operator that overwrites it (`copy_`, `fill_`), and those that give only a shape (`empty_like`)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return launch_tensors(args, kwargs)
    name = schema.name.split("::")[-1]
    if name in _SHAPE_ONLY:
        return []
    overwrites = name in _OVERWRITES
    return launch_tensors([v for i, a, v in _schema_arguments(op, args, kwargs)
                           if not (_writes(a) and (a.kwarg_only or (overwrites and i == 0)))], {})


__all__ = ["launch_tensors", "read_by", "written_by"]
