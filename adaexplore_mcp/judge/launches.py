"""Which Triton kernels defined by the candidate actually launched during a call.

Integrity: a ModelNew that does its work in PyTorch (or returns a cached tensor) launches no kernel of
its own. We wrap `run` of Triton's `JITFunction` (compiled GPU path) and `InterpretedFunction` (CPU
interpreter); both have `run(self, *args, grid, warmup, **kwargs)` in Triton 3.6 and 3.9, and
`Autotuner`/`Heuristics` end up calling them, so one hook sees every launch. A launch counts when
the kernel's Python function was defined in the candidate's module and the call returned.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import inspect
import re
import textwrap
import threading
from typing import Any

from .host_scalars import plain

_state = threading.local()
_INSTALLED = "_adaexplore_launch_hook"


_DEF = re.compile(r"^\s*def\s+(\w+)", re.MULTILINE)
_BLANK_LINES = re.compile(r"^[ \t]+$", re.MULTILINE)


def _jit_src(kernel: Any) -> str | None:
    """The source a JITFunction kept when it was made (`_src`, from the `def` on): what Triton compiles on a GPU.
    The interpreter's functions keep none."""
    src = kernel.__dict__.get("_src") if hasattr(kernel, "__dict__") else None
    return src if isinstance(src, str) else None


def _src_def_name(kernel: Any) -> str | None:
    match = _DEF.search(_jit_src(kernel) or "")
    return match.group(1) if match else None


def kernel_names(kernel: Any) -> set[str]:
    """Every name a launched kernel goes by: its function's `__name__` and code name, the name its JITFunction
    took when it was made, and the `def` in the source Triton compiles. They agree unless the candidate renamed
    something at run time (`cheat.fn.__name__ = "affine_kernel"` had the trials run one
    kernel while the record, and so the replay, named an honest one)."""
    fn = getattr(kernel, "fn", None)
    made = kernel.__dict__.get("__name__") if hasattr(kernel, "__dict__") else None  # JITFunction's own, not a property
    names = {getattr(fn, "__name__", None), getattr(getattr(fn, "__code__", None), "co_name", None), made,
             _src_def_name(kernel)}
    return {n for n in names if isinstance(n, str)}


def kernel_name(kernel: Any) -> str:
    """The name a launch is known by: the `def` Triton compiles where there is one (a GPU), else the function's."""
    return _src_def_name(kernel) or str(getattr(getattr(kernel, "fn", None), "__name__", "?"))


def kernel_source(kernel: Any) -> str | None:
    """The source Triton runs for a kernel: the text its JITFunction kept (a GPU), or its function's (the
    interpreter reads it again, through linecache); None when it cannot be read."""
    src = _jit_src(kernel)
    if src is not None:
        return src
    try:
        return inspect.getsource(kernel.fn)
    except (OSError, TypeError, AttributeError):
        return None


def def_digest(node: ast.FunctionDef) -> str:
    """A `def` as code, whatever its decorators, comments, blank lines and indentation: what the recorder and the
    replay compare (the kernel that ran is the `def` of its name in the source, not one made by `exec` or swapped
    in at run time)."""
    bare = copy.deepcopy(node)
    bare.decorator_list = []
    for const in ast.walk(bare):  # dedent (Triton's, and the recorder's) empties whitespace-only lines of strings
        if isinstance(const, ast.Constant) and isinstance(const.value, str):
            const.value = _BLANK_LINES.sub("", const.value)
    return hashlib.sha256(ast.dump(bare).encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=256)
def source_digest(text: str | None) -> str | None:
    """`def_digest` of the first `def` in a kernel's source text; None when there is none. Cached by the text:
    every launch of every recorded trial asks (a parse and a deep copy each time otherwise)."""
    try:
        tree = ast.parse(textwrap.dedent(text or ""))
    except (SyntaxError, ValueError):
        return None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    return def_digest(node) if node is not None else None


def _wrap(cls: type) -> None:
    original = cls.run
    if getattr(original, _INSTALLED, False):
        return

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_state, "inside", False):  # wrapped twice (another hook installed between): one launch, seen once
            return original(self, *args, **kwargs)
        watched = getattr(_state, "module", None)
        mine = watched is not None and not kwargs.get("warmup", False) and \
            getattr(getattr(self, "fn", None), "__module__", None) == watched
        _state.inside, _state.raised = True, True
        try:
            if mine and getattr(_state, "recorder", None) is not None:
                _state.recorder(self, args, kwargs)
                args, kwargs = tuple(plain(a) for a in args), {k: plain(v) for k, v in kwargs.items()}
            result = original(self, *args, **kwargs)
            _state.raised = False
        finally:
            _state.inside = False
            # `after` also when the launch raised: the recorder is out of the launch either way (a failed
            # launch caught by the candidate, or by an autotuner, left every later operator "inside")
            if mine and getattr(_state, "after", None) is not None:
                _state.after(self, args, kwargs)
        if mine and (name := kernel_name(self)) not in _state.names:
            _state.names.append(name)
        return result

    setattr(run, _INSTALLED, True)
    cls.run = run  # type: ignore[method-assign]


def raised() -> bool:
    """Inside `after`: whether the launch raised (the candidate saw that error itself)."""
    return bool(getattr(_state, "raised", False))


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
    returned (replay/record.py)."""
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
