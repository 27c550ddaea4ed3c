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
        result = original(self, *args, **kwargs)
        watched = getattr(_state, "module", None)
        if watched is not None and not kwargs.get("warmup", False):
            module, name = _kernel_of(self)
            if module == watched and name not in _state.names:
                _state.names.append(name)
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


def begin(module_name: str) -> None:
    """Start recording launches of kernels defined in `module_name`."""
    _state.module = module_name
    _state.names = []


def end() -> list[str]:
    """Stop recording; names of the candidate's kernels that launched since `begin`."""
    names = list(getattr(_state, "names", []))
    _state.module = None
    _state.names = []
    return names
