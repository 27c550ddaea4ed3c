"""Record what a candidate launches under Triton's CPU interpreter: step 1 of the front-end check (check.py).

Record (`install`, then `begin`/`end`, or a `Recorder` given to `launches.begin(recorder=...)`, which
is what `Frontend` does for the runner): during the candidate's forward call we keep, for each launch of
a kernel defined in the candidate's module, the kernel and its launch arguments as passed
(positional and keyword, meta-parameters such as BLOCK sizes and num_warps included), each tensor
replaced by a `TensorArg` (dtype, 16-byte alignment: all Triton specializes a pointer on). The hook
wraps `InterpretedFunction.run(self, *args, grid, warmup, **kwargs)`, which has that shape in
Triton 3.6 and 3.9, and keeps the arguments *unbound*: binding and specialization are left to
Triton itself at check time, so nothing here depends on how a version binds them. A `@triton.jit`
function called directly from host code (a GPU raises; the interpreter runs it) is recorded too.

`install()` also snapshots the clean triton.language (compile.py), before any candidate runs.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

from .compile import _snapshot_language

MAX_RECORDED = 256  # distinct launches kept per forward call (a kernel in a loop: once per argument set)
_INSTALLED = "_adaexplore_frontend_hook"
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR

_state = threading.local()


# ================================================================================================ records

@dataclass(frozen=True)
class TensorArg:
    """A tensor argument as Triton specializes it: a pointer to `dtype`, 16-byte aligned or not."""

    dtype: Any
    aligned: bool = True

    def data_ptr(self) -> int:
        return 0 if self.aligned else 8

    def __repr__(self) -> str:
        return f"TensorArg({str(self.dtype).removeprefix('torch.')}{'' if self.aligned else ', unaligned'})"


@dataclass(frozen=True)
class FrontendUnavailable:
    """The check could not run: not a verdict on the candidate. `reason` belongs in `unconfirmed`."""

    reason: str


@dataclass
class Launch:
    """One recorded launch: the kernel object and its arguments as passed, tensors replaced."""

    kernel: Any  # what was launched: an InterpretedFunction (or a JITFunction / a plain function)
    fn: Any  # the kernel's Python function
    args: tuple
    kwargs: dict  # keyword arguments: parameters and meta-parameters (num_warps, num_stages...)
    grid: Any = None  # the grid when it was a tuple (a compile does not need it)
    via_autotuner: bool = False
    error: BaseException | None = None  # known at record time: a jit function called from host code
    site: list[types.FrameType] = field(default_factory=list, repr=False)  # the candidate's frames, outermost first

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "?")

    @property
    def bound(self) -> dict[str, Any]:
        """Kernel parameter name -> recorded value (no defaults applied; meta-parameters excluded)."""
        sig = inspect.signature(self.fn)
        kw = {k: v for k, v in self.kwargs.items() if k in sig.parameters}
        try:
            return dict(sig.bind_partial(*self.args, **kw).arguments)
        except TypeError:
            return {**dict(zip(sig.parameters, self.args)), **kw}

    @property
    def meta(self) -> dict[str, Any]:
        """Launch keywords that are not kernel parameters (num_warps, num_stages, ...)."""
        params = inspect.signature(self.fn).parameters
        return {k: v for k, v in self.kwargs.items() if k not in params}


def _stand_in(value: Any) -> Any:
    """What we keep of one argument: a tensor becomes a TensorArg; tuples recurse; the rest as is."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        try:
            return TensorArg(value.dtype, value.data_ptr() % 16 == 0)
        except Exception:  # noqa: BLE001 - an odd tensor-like: keep it, specialization will judge it
            return value
    if type(value) is tuple:
        return tuple(_stand_in(v) for v in value)
    return value  # dtypes, constexprs, jit functions, lists (which Triton rejects), descriptors...


def _freeze(value: Any) -> Any:
    """A hashable key for a recorded value (to de-duplicate launches)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    try:
        hash(value)
    except TypeError:
        return ("id", type(value).__qualname__, id(value))
    return (type(value).__name__, value)


def _launch_key(launch: Launch) -> tuple:
    return (launch.fn, _freeze(launch.args), _freeze(launch.kwargs), launch.error is not None)


def record_launch_args(kernel: Any, args: tuple, kwargs: dict, grid: Any = None,
                       via_autotuner: bool = False) -> Launch:
    """The Launch of `kernel[grid](*args, **kwargs)`; keeps no tensor. Usable from any launch hook."""
    return Launch(kernel=kernel, fn=getattr(kernel, "fn", kernel), args=tuple(_stand_in(a) for a in args),
                  kwargs={k: _stand_in(v) for k, v in kwargs.items() if k not in ("grid", "warmup")},
                  grid=grid if isinstance(grid, tuple) else None, via_autotuner=via_autotuner)


# ================================================================================================ recorder

class Recorder:
    """Collects the distinct launches of one forward call.

    Callable as `recorder(kernel, args, kwargs)`, the hook `launches.begin(recorder=...)` calls before each
    launch of a candidate kernel (its `kwargs` still hold `grid` and `warmup`); `begin`/`end` below use
    one too, fed by this module's own hook. `module`: record only kernels defined there (None: all)."""

    def __init__(self, module: str | None = None) -> None:
        self.module = module
        self.launches: list[Launch] = []
        self.keys: set = set()
        self.dropped = 0  # distinct launches past MAX_RECORDED
        self.last: Launch | None = None  # the launch the current call recorded, if it was new

    def __call__(self, kernel: Any, args: tuple, kwargs: dict) -> None:
        self.last = None
        try:
            if not kwargs.get("warmup", False):
                self.add(record_launch_args(kernel, args, kwargs, kwargs.get("grid"), _from_autotuner()))
        except Exception:  # noqa: BLE001 - recording must never break a launch
            pass

    def drop_last(self) -> None:
        """Forget the launch just recorded: it raised here too, so the candidate saw its error (and caught it, or
        failed with it); the front end must not report it as a GPU-only failure at a later line."""
        if self.last is not None and self.launches and self.launches[-1] is self.last:
            self.launches.pop()
            self.keys.discard(_launch_key(self.last))
        self.last = None

    def add(self, launch: Launch) -> None:
        fn_module = getattr(launch.fn, "__module__", None) or ""
        if self.module is not None and fn_module != self.module:
            return
        if self.module is None and launch.error is not None and fn_module.startswith("triton."):
            return  # a library function called from host code by something else
        key = _launch_key(launch)
        if key in self.keys:
            return
        if len(self.keys) >= MAX_RECORDED:
            self.dropped += 1
            return
        launch.site = _candidate_frames(launch.fn)
        self.keys.add(key)
        self.launches.append(launch)
        self.last = launch

    def close(self) -> list[Launch]:
        """The launches, in order; the candidate's frames they keep lose their locals (tensors)."""
        for launch in self.launches:
            for f in launch.site:  # finished frames: keep their line, drop their locals
                if f.f_code.co_flags & _SUSPENDABLE:
                    continue  # clearing a suspended generator's frame would close it
                try:
                    f.clear()
                except RuntimeError:  # still executing (closed inside the candidate's call)
                    pass
        return list(self.launches)


def _from_autotuner() -> bool:
    """Whether the Autotuner is benchmarking configs (`_bench`'s `kernel_call`), where it absorbs some
    compile errors of a config; its final launch of the chosen config does not."""
    f = sys._getframe(1)
    for _ in range(10):
        if f is None:
            return False
        if f.f_code.co_name == "kernel_call" and f.f_code.co_filename.endswith(os.sep + "autotuner.py"):
            return True
        f = f.f_back
    return False


def _candidate_frames(fn: Any) -> list[types.FrameType]:
    """The current stack's frames in `fn`'s file (the candidate's launch site), outermost first."""
    path = getattr(getattr(fn, "__code__", None), "co_filename", None)
    frames = []
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename == path and f.f_code is not getattr(fn, "__code__", None):
            frames.append(f)
        f = f.f_back
    return frames[::-1]


def _with_site(exc: BaseException, site: list[types.FrameType]) -> BaseException:
    """`exc` with the launch site's frames in front of its traceback, as a GPU launch would have them."""
    tb = exc.__traceback__
    for f in reversed(site):  # innermost first: each new entry wraps the inner ones
        tb = types.TracebackType(tb, f, f.f_lasti, f.f_lineno)
    return exc.with_traceback(tb)


def _direct_call_error() -> BaseException:
    """What `JITFunction.__call__` raises on a GPU when host code calls a jit function (the site comes later)."""
    try:
        from triton.runtime.jit import JITFunction

        JITFunction.__call__(None)
    except Exception as e:  # noqa: BLE001
        return e.with_traceback(None)
    return RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")


def _wrap_run(cls: type) -> None:
    original = cls.run
    if getattr(original, _INSTALLED, False):
        return

    def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        recorder = getattr(_state, "recorder", None)
        if recorder is not None:
            recorder(self, args, {**kwargs, "grid": grid, "warmup": warmup})
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            _state.depth -= 1

    setattr(run, _INSTALLED, True)
    cls.run = run  # type: ignore[method-assign]


def _wrap_call(cls: type) -> None:
    """Record a jit function called from host code (outside any launch); calls inside kernels pass through."""
    original = cls.__call__
    if getattr(original, _INSTALLED, False):
        return

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = getattr(_state, "recorder", None) or getattr(_state, "direct", None)
        if recorder is not None and getattr(_state, "depth", 0) == 0:
            try:
                launch = record_launch_args(self, args, kwargs)
                launch.error = _direct_call_error()
                recorder.add(launch)
            except Exception:  # noqa: BLE001
                pass
        return original(self, *args, **kwargs)

    setattr(call, _INSTALLED, True)
    cls.__call__ = call  # type: ignore[method-assign]


def install() -> None:
    """Hook the interpreter's launch path and snapshot the clean triton.language; idempotent.

    Call it in the worker after importing triton and before any candidate runs (next to
    `launches.install()`; the two hooks are independent and stack in either order)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported Triton has it
        return
    _snapshot_language()
    _wrap_run(InterpretedFunction)
    _wrap_call(InterpretedFunction)
    from .. import compile_guard

    compile_guard.install()  # what the GPU replay's compile refuses, the front-end check refuses at its line


def begin(module_name: str) -> None:
    """Start recording launches of kernels defined in `module_name` ("*": every kernel); needs `install()`."""
    _state.recorder = Recorder(None if module_name == "*" else module_name)


def end() -> list[Launch]:
    """Stop recording; the distinct launches since `begin`, in launch order."""
    recorder = getattr(_state, "recorder", None)
    _state.recorder = None
    return recorder.close() if recorder is not None else []
