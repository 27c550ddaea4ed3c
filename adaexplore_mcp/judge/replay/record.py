"""Record what a candidate's forward call ran, as a straight-line program another process can replay.

Why: every check made inside the candidate's process can be recognised there. A candidate that is run
once with its Triton launches skipped can notice (a sentinel kernel that sets a flag, torch's global
modes, the launch hook's own state) and return garbage on purpose, so its output seems to depend on its
kernels while PyTorch does the work in every other call. So nothing is skipped in the candidate's process
any more: every trial forward is recorded the same way, and the last one is replayed by `run.py` in a
fresh sandboxed process where no candidate Python runs (only its kernels, rebuilt from the source the
referee holds), on inputs the candidate never saw, once as recorded and once with its launches skipped.
There the program is frozen: no `if` of the candidate's can see what the judge does.

What is recorded, under a `TorchDispatchMode` and the launch hook (`launches.begin(recorder=...)`):

- each ATen operator call (`aten::add.Tensor`...): its arguments, tensors replaced by slots, and its result;
  a value read back to the host (`.item()`) is kept so the replay can tell when it differs, and a launch
  argument computed from such values is kept as that computation (host_scalars.py);
- each launch of a kernel defined in the candidate's module: its arguments as passed, the grid it resolved
  to, and the module-level values its body reads (numbers, `tl.constexpr`s, Triton modules, helpers);
- tensors that existed before the call (parameters, buffers, cached attributes): shipped by value, as
  constants. They cannot carry the answer: the replay's inputs are new.

A forged program gains nothing: the replay checks that it computes the reference's output from new inputs
with the candidate's kernels, whatever the candidate reports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import launches
from ..compare import MAX_NESTING as MAX_INPUT_NESTING, flat_tensors
from ..host_scalars import HostScalar
from ..launches import kernel_name, kernel_names, kernel_source, source_digest
from ..wire import encode_float

_LAUNCHES_FILE = launches.__file__
MAX_STEPS = 10000  # a forward call with more recorded operators and launches is not replayed
MAX_PROGRAM_BYTES = 3 << 20  # its JSON travels in one message header (wire.MAX_HEADER_BYTES)
TRITON_MODULES = ("triton", "math")


def _scalar(v: Any) -> Any:
    return encode_float(v) if isinstance(v, float) else v


class Unreplayable(Exception):
    """The call did something the replay cannot reproduce (the message says what, for the candidate)."""


def _storage_key(t: torch.Tensor) -> tuple:
    return (t.device.type, t.untyped_storage().data_ptr())


def _custom_op_implementation(func: Any) -> Any:
    """The Python function of a `torch.library.custom_op` defined in this process (PyTorch's documented way to
    make a Triton kernel an operator), or None: what it runs is the call's work, recorded like the rest."""
    if getattr(func, "namespace", "aten") in ("aten", "prims"):
        return None
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:  # pragma: no cover - every supported torch has it
        return None
    opdef = OPDEFS.get(str(func.name()).split(".")[0])
    return getattr(opdef, "_init_fn", None)


class WorkTrace(TorchDispatchMode):
    """One forward call. Use as a context manager around it, pass `before`/`after` to the launch hook,
    then `finish(result)`; `program` and `constants` are what `op_program` sends."""

    def __init__(self, inputs: list[Any]) -> None:
        super().__init__()
        self.slots: dict[int, int] = {}
        self.storages: dict[tuple, int] = {}  # a live slot's storage -> that slot (aliases made outside dispatch)
        self.alive: list[torch.Tensor] = []  # ids stay unique while the trace holds the tensors
        self.constants: list[torch.Tensor] = []
        self.constant_slots: list[int] = []
        self.steps: list[dict[str, Any]] = []
        self.kernels: dict[str, dict[str, Any]] = {}
        self.problem: str | None = None
        self._building: set[str] = set()  # kernels whose entry is being made (a kernel may read itself)
        self._last_launch: dict[str, Any] | None = None  # the step `before` added for the launch under way
        self.paused = 0  # inside a launch: the interpreter's own copies are not the candidate's operators
        self.host_reads = 0  # values read back with `.item()` (host_scalars.py)
        self.last_read: int | None = None
        self._item: Any = None
        self.inputs = [self._input(x) for x in inputs]
        self.output: Any = None

    # -- slots ---------------------------------------------------------------------------------------
    def _input(self, x: Any, depth: int = 0) -> Any:
        """An input's slot; a list of them for a list (or tuple) of tensors; None for anything else (the replay's
        inputs are new, and what is not a tensor is passed as it comes)."""
        if isinstance(x, torch.Tensor):
            return self._new(x)
        if isinstance(x, (list, tuple)) and depth < MAX_INPUT_NESTING and flat_tensors(x):
            return [self._input(v, depth + 1) for v in x]
        return None

    def _new(self, t: torch.Tensor) -> int:
        slot = len(self.alive)
        self.slots[id(t)] = slot
        self.alive.append(t)
        if t.untyped_storage().nbytes():
            self.storages.setdefault(_storage_key(t), slot)
        return slot

    def _slot(self, t: torch.Tensor) -> int:
        slot = self.slots.get(id(t))
        if slot is not None:
            return slot
        base = self.storages.get(_storage_key(t)) if t.untyped_storage().nbytes() else None
        slot = self._new(t)
        if base is not None:  # a view made without an operator (`.data`, `as_subclass`): the same memory
            self._step({"alias": base, "slot": slot, "dtype": str(t.dtype).removeprefix("torch."),
                        "size": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()})
        else:  # made before the call: a parameter, a buffer, an attribute cached earlier
            self.constants.append(t.detach())
            self.constant_slots.append(slot)
        return slot

    def arg(self, v: Any) -> Any:
        """A JSON-able description of an argument, tensors as slots."""
        if isinstance(v, torch.Tensor):
            return {"t": self._slot(v)}
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, HostScalar):  # a launch argument computed from values read back: the replay recomputes it
            return {"hexpr": v.expr}
        if isinstance(v, float):
            return encode_float(v)
        if isinstance(v, (list, tuple)):
            return {"l" if isinstance(v, list) else "tu": [self.arg(x) for x in v]}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": v.type}
        if isinstance(v, (torch.memory_format, torch.layout)):
            return {"enum": str(v).removeprefix("torch.")}
        if type(v).__name__ == "dtype" and type(v).__module__.startswith("triton.language"):  # tl.float32 as a
            return {"tl_dtype": str(v.name)}                                                     # constexpr argument
        if type(v).__name__ == "constexpr" and hasattr(v, "value"):  # tl.constexpr passed at launch
            return self.arg(v.value)
        if hasattr(v, "item") and type(v).__module__ == "numpy":
            return self.arg(v.item())
        if dataclasses.is_dataclass(v) and type(v).__module__.startswith("triton"):  # a TMA TensorDescriptor
            return {"triton_obj": [type(v).__module__, type(v).__qualname__],
                    "fields": {f.name: self.arg(getattr(v, f.name)) for f in dataclasses.fields(v)}}
        raise Unreplayable(f"an argument of type {type(v).__name__}")

    def result(self, v: Any) -> Any:
        """Like `arg` for what an operator returned: new tensors get new slots; host values are kept."""
        if isinstance(v, torch.Tensor):
            slot = self.slots.get(id(v))
            return {"t": self._new(v) if slot is None else slot}
        if isinstance(v, (list, tuple)):
            return {"l": [self.result(x) for x in v]}
        if v is None or isinstance(v, (bool, int, float, str)):
            return {"v": _scalar(v)}
        raise Unreplayable(f"an operator result of type {type(v).__name__}")

    def _step(self, step: dict[str, Any]) -> None:
        if len(self.steps) >= MAX_STEPS:
            raise Unreplayable(f"more than {MAX_STEPS} operators and launches in one forward call")
        self.steps.append(step)

    # -- ATen operators ------------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.paused and self.problem is None and (where := _foreign_code_in_launch()) is not None:
            self.problem = (f"{func.name()} ran inside a kernel launch, from {where} (a grid function or a launch "
                            "hook that computes): the replay cannot see it; compute before or after the launch")
        if self.paused or self.problem is not None:
            return func(*args, **kwargs)
        implementation = _custom_op_implementation(func)
        if implementation is not None:  # its Python, traced like any other (its operators and launches recorded)
            with self:
                return implementation(*args, **kwargs)
        try:
            step = {"op": func.name(), "args": self.arg(list(args)), "kwargs": {k: self.arg(v) for k, v in kwargs.items()}}
        except Unreplayable as exc:
            self.problem = f"{func.name()} with {exc}"
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        try:
            step["out"] = self.result(out)
            if step["op"] == "aten::_local_scalar_dense" and isinstance(out, float):
                step["out"]["h"] = self.last_read = self.host_reads  # which read a HostScalar names
                self.host_reads += 1
            self._step(step)
        except Unreplayable as exc:
            self.problem = f"{func.name()} returning {exc}"
        return out

    # -- Triton launches (the launch hook's `recorder` and `after`) ----------------------------------
    def before(self, kernel: Any, args: tuple, kwargs: dict) -> None:
        self.paused += 1
        if self.problem is not None:
            return
        name = kernel_name(kernel)
        step: dict[str, Any] = {"launch": name}
        try:
            step["args"] = self.arg(list(args))
            step["kwargs"] = {k: self.arg(v) for k, v in kwargs.items() if k not in ("grid", "warmup")}
            self._kernel(kernel, name)
        except Unreplayable as exc:
            self.problem = f"the launch of {name} with {exc}"
            return
        grid = kwargs.get("grid")
        if callable(grid):
            def resolved(meta: Any, _grid: Any = grid) -> Any:
                value = _grid(meta)
                step["grid"] = [int(g) for g in (value if isinstance(value, (list, tuple)) else (value,))]
                return value
            kwargs["grid"] = resolved  # the hook's own dict: Triton calls this wrapper, which notes the value
        else:
            step["grid"] = [int(g) for g in (grid if isinstance(grid, (list, tuple)) else (grid,))]
        self._step(step)
        self._last_launch = step

    def after(self, kernel: Any, args: tuple, kwargs: dict) -> None:
        self.paused = max(0, self.paused - 1)
        if launches.raised() and self.steps and self.steps[-1] is self._last_launch:
            self.steps.pop()  # it raised here too: the candidate saw the error; the replay must not run it
        self._last_launch = None

    def _kernel(self, kernel: Any, name: str) -> None:
        """The module-level values a kernel's body reads, so the replay's copy of it reads the same, and the digest
        of the code it runs (`__ast__`, checked against the source's `def` by the replay). Taken at every launch:
        a kernel whose values or code change between its launches in one call is refused (a
        helper swapped, a constexpr flipped, after a first launch the record kept)."""
        fn = getattr(kernel, "fn", None)
        if fn is None or name in self._building:
            return
        names = kernel_names(kernel)
        if len(names) > 1:
            raise Unreplayable(f"a kernel going by several names ({', '.join(sorted(n[:40] for n in names)[:4])}): "
                               "it was renamed at run time")
        digest = source_digest(kernel_source(kernel))
        if digest is None:
            raise Unreplayable(f"kernel {name[:60]} whose source cannot be read (made at run time?)")
        entry: dict[str, Any] = {"__ast__": digest}
        self._building.add(name)
        try:
            scope = getattr(fn, "__globals__", {})
            for ref in getattr(getattr(fn, "__code__", None), "co_names", ()):
                if ref in scope:
                    entry[ref] = self._global(scope[ref])
        finally:
            self._building.discard(name)
        if self.kernels.setdefault(name, entry) != entry:
            raise Unreplayable(f"kernel {name[:60]} whose code or module-level values changed between its launches")

    def _global(self, value: Any) -> dict[str, Any]:
        """How the replay rebuilds one module-level value a kernel may read; what it cannot rebuild is named,
        and the replay says so only if the kernel's body really reads that name."""
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith(TRITON_MODULES):
                return {"module": value.__name__}
            return {"unsupported": f"module {value.__name__}"}
        inner = getattr(value, "fn", None)
        if inner is not None and hasattr(inner, "__globals__") and hasattr(value, "run"):  # another @jit function
            self._kernel(value, kernel_name(value))
            return {"kernel": kernel_name(value)}
        if type(value).__name__ == "constexpr" and hasattr(value, "value"):
            plain = value.value
            if plain is None or isinstance(plain, (bool, int, float, str)):
                return {"constexpr": _scalar(plain)}
            if type(plain).__name__ == "dtype" and type(plain).__module__.startswith("triton"):  # tl.constexpr(tl.float32)
                return {"constexpr_dtype": str(plain.name)}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"value": _scalar(value)}
        module = getattr(value, "__module__", None) or ""
        qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if module.startswith(TRITON_MODULES) and isinstance(qualname, str):  # tl.float32, libdevice.exp...
            return {"attr": [module, qualname]}
        if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton"):  # DTYPE = tl.float16
            return {"tl_dtype": str(value.name)}
        return {"unsupported": type(value).__name__}

    # -- values read back to the host ----------------------------------------------------------------
    def __enter__(self) -> "WorkTrace":
        """While recording, `Tensor.item()` returns a HostScalar for a float it reads (host_scalars.py). Entered
        again inside a custom operator's implementation: patched once, by the outermost entry."""
        self._depth = getattr(self, "_depth", 0) + 1
        if self._depth > 1:
            return super().__enter__()
        trace, original = self, torch.Tensor.item
        self._item = original

        def item(t: torch.Tensor) -> Any:
            trace.last_read = None
            value = original(t)
            read = trace.last_read
            return HostScalar(value, ["h", read]) if read is not None and type(value) is float else value

        torch.Tensor.item = item  # type: ignore[method-assign]
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            torch.Tensor.item = self._item  # type: ignore[method-assign]
        super().__exit__(*exc)

    # -- the end -------------------------------------------------------------------------------------
    def finish(self, result: Any) -> None:
        """Describe the output, then let go of every tensor but the constants: the inputs are the referee's
        memory, lent, and a large task's intermediates would stay on the device until the replay."""
        if self.problem is None:
            try:
                self.output = self.arg(result)
            except Unreplayable as exc:
                self.problem = f"an output of type {exc}"
        self.alive, self.slots, self.storages = [], {}, {}

    def program(self) -> dict[str, Any]:
        """The JSON half of what the replay needs (the constants travel as tensors beside it)."""
        return {"inputs": self.inputs, "constants": self.constant_slots, "steps": self.steps,
                "kernels": self.kernels, "output": self.output}


class ProgramOps:
    """The runner's `program` op (mixed into `runner.Runner`, which sets `work_trace` after each recorded trial)."""

    work_trace: WorkTrace | None
    kept: dict[str, Any]

    def op_program(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The last recorded trial as a program, its constants as tensors (kept until `release`)."""
        from .. import wire

        trace = self.work_trace
        if trace is None:
            return {"unreplayable": "no trial was recorded"}
        program = trace.program()
        if trace.problem is None and len(json.dumps(program)) > MAX_PROGRAM_BYTES:
            trace.problem = f"the recorded call is over {MAX_PROGRAM_BYTES >> 20} MiB as a program"
        if trace.problem is not None:
            return {"unreplayable": trace.problem[:300]}
        packs: list[Any] = []
        self.kept["program"] = (trace.constants, packs)
        return {"program": program, "constants": wire.encode_value(list(trace.constants), out, packs)}


__all__ = ["MAX_PROGRAM_BYTES", "MAX_STEPS", "ProgramOps", "Unreplayable", "WorkTrace"]


def _library_dirs() -> tuple[str, ...]:
    import sysconfig

    import numpy
    import triton

    dirs = [os.path.dirname(m.__file__) for m in (torch, triton, numpy) if getattr(m, "__file__", None)]
    dirs += [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), sysconfig.get_paths()["stdlib"]]
    return tuple(d.rstrip("/") + "/" for d in dirs)


_LIBRARIES: tuple[str, ...] = ()


def _foreign_code_in_launch() -> str | None:
    """Where code that is neither Triton's, PyTorch's, the standard library's nor the judge's runs between this
    operator and the launch hook's `run` (a grid callable and a `pre_run_hook` computed the
    output in PyTorch while the launch's own operators, Triton's copies, go unrecorded); None when there is none."""
    global _LIBRARIES
    if not _LIBRARIES:
        _LIBRARIES = _library_dirs()
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "run" and code.co_filename == _LAUNCHES_FILE:
            return None
        if not code.co_filename.startswith(_LIBRARIES):
            return f"{os.path.basename(code.co_filename)[:60]}:{frame.f_lineno} ({code.co_name[:40]})"
        frame = frame.f_back
    return None

