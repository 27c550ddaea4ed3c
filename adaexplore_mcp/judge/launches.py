"""Which Triton kernels defined by the candidate actually launched during a call.

Integrity: a ModelNew that does its work in PyTorch (or returns a cached tensor) launches no kernel of
its own. We wrap `run` of Triton's `JITFunction` (compiled GPU path) and `InterpretedFunction` (CPU
interpreter); both have `run(self, *args, grid, warmup, **kwargs)` in Triton 3.6 and 3.9, and
`Autotuner`/`Heuristics` end up calling them, so one hook sees every launch. A launch counts when
the kernel's Python function was defined in the candidate's module and the call returned.
"""

from __future__ import annotations

import threading
from typing import Any

_state = threading.local()
_INSTALLED = "_adaexplore_launch_hook"


def _kernel_of(kernel: Any) -> tuple[str | None, str]:
    fn = getattr(kernel, "fn", None)
    return getattr(fn, "__module__", None), getattr(fn, "__name__", "?")


def _wrap(cls: type) -> None:
    original = cls.run
    if getattr(original, _INSTALLED, False):
        return

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_state, "inside", False):  # wrapped twice (another hook installed between): one launch, seen once
            return original(self, *args, **kwargs)
        watched = getattr(_state, "module", None)
        mine = watched is not None and not kwargs.get("warmup", False) and _kernel_of(self)[0] == watched
        _state.inside = True
        try:
            if mine and getattr(_state, "recorder", None) is not None:
                _state.recorder(self, args, kwargs)
            result = original(self, *args, **kwargs)
        finally:
            _state.inside = False
        if mine and _kernel_of(self)[1] not in _state.names:
            _state.names.append(_kernel_of(self)[1])
        if mine and getattr(_state, "after", None) is not None:
            _state.after(self, args, kwargs)
        return result

    setattr(run, _INSTALLED, True)
    cls.run = run  # type: ignore[method-assign]


def install() -> None:
    """Hook both launch paths; idempotent. Call in the worker after importing triton."""
    from triton.runtime.jit import JITFunction

    _wrap(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported Triton has it
        return
    _wrap(InterpretedFunction)


def begin(module_name: str, recorder: Any = None, after: Any = None) -> None:
    """Start recording launches of kernels defined in `module_name`; `recorder(kernel, args, kwargs)` sees
    each launch before it runs (and may replace `kwargs["grid"]`), `after(kernel, args, kwargs)` once it
    returned (work_trace.py)."""
    _state.module = module_name
    _state.names = []
    _state.recorder = recorder
    _state.after = after


def end() -> list[str]:
    """Stop recording; names of the candidate's kernels that launched since `begin`."""
    names = list(getattr(_state, "names", []))
    _state.module = None
    _state.names = []
    _state.recorder = None
    _state.after = None
    return names
