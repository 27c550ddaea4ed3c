"""The task side of an evaluation, in the worker: load the reference once, make fresh inputs on the device.

A task's module and reference model are cached per worker, keyed by (source hash, shape overrides),
so a search that evaluates many candidates on one task pays the import and construction once.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..tasks.format import apply_shapes, import_file
from . import precision
from .classify import CandidateFile, describe

CACHE_SIZE = 8


class ReferenceFailure(Exception):
    """The task's reference failed; the message says where and how (it is not the candidate's fault)."""


@dataclass
class LoadedTask:
    module: ModuleType
    init_inputs: list[Any]
    model: Any
    file: CandidateFile


def fresh_seed() -> int:
    """Never the same twice: a candidate cannot memorize outputs per seed."""
    return secrets.randbits(63)


def to_device(x: Any, device: str) -> Any:
    return x.to(device) if isinstance(x, torch.Tensor) else x


def clone_all(xs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _fail(what: str, exc: BaseException, file: CandidateFile) -> ReferenceFailure:
    d = describe(exc, file)
    where = f" at line {d.source_lineno}: `{d.source_line}`" if d.source_lineno else ""
    return ReferenceFailure(f"the reference's {what} raised {d.exception}: {d.message}{where}")


def build_module(cls: Any, init_inputs: list[Any], device: str, seed: int) -> Any:
    """Construct a model directly on the device (fast for large layers), in eval mode."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


class TaskCache:
    def __init__(self, device: str) -> None:
        self.device = device
        self._cache: OrderedDict[tuple, LoadedTask] = OrderedDict()

    def get(self, task: dict) -> LoadedTask:
        """task: {"module", "path", "source", "shapes"}; raises ReferenceFailure."""
        key = (task["module"], tuple(sorted(task["shapes"].items())))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        loaded = self._load(task)
        self._cache[key] = loaded
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return loaded

    def forget(self) -> None:
        self._cache.clear()

    def _load(self, task: dict) -> LoadedTask:
        file = CandidateFile(task["path"], task["source"])
        try:
            module = import_file(task["module"], Path(task["path"]))
        except BaseException as exc:  # noqa: BLE001 - any failure of user code is a value
            raise _fail("import", exc, file) from None
        apply_shapes(module, task["shapes"])
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, name):
                raise ReferenceFailure(f"the reference does not define {name}; a KernelBench task needs "
                                       "`class Model(nn.Module)`, `def get_inputs()` and `def get_init_inputs()`")
        try:
            with torch.device(self.device):
                init_inputs = list(module.get_init_inputs())
        except BaseException as exc:  # noqa: BLE001
            raise _fail("get_init_inputs()", exc, file) from None
        precision.pin_strict()
        try:
            model = build_module(module.Model, init_inputs, self.device, seed=0)
        except BaseException as exc:  # noqa: BLE001
            raise _fail("Model(*get_init_inputs())", exc, file) from None
        return LoadedTask(module, init_inputs, model, file)

    def inputs(self, task: LoadedTask, seed: int) -> list[Any]:
        """Fresh inputs drawn on the device (torch.randn under `with torch.device`)."""
        torch.manual_seed(seed)
        try:
            with torch.device(self.device):
                xs = task.module.get_inputs()
        except BaseException as exc:  # noqa: BLE001
            raise _fail("get_inputs()", exc, task.file) from None
        if not isinstance(xs, (list, tuple)):
            raise ReferenceFailure(f"the reference's get_inputs() returned {type(xs).__name__}, not a list")
        return [to_device(x, self.device) for x in xs]

    def run(self, task: LoadedTask, inputs: list[Any]) -> Any:
        """The reference forward, in strict float32 (flags pinned again before every call)."""
        precision.pin_strict()
        try:
            with torch.no_grad():
                return task.model(*inputs)
        except BaseException as exc:  # noqa: BLE001
            raise _fail("forward", exc, task.file) from None
