"""Compile what the CPU interpreter ran through Triton's real compiler front end (AST -> TTIR).

Without a GPU, candidates run under Triton's CPU interpreter, which executes a kernel's body as Python
and so accepts code the GPU compiler rejects (a module-level float read inside a kernel,
`tl.static_range` over a runtime bound, `break`, lambdas, unknown launch keywords...). This module
closes that gap in two steps, both inside the worker process:

1. Record (`install`, then `begin`/`end`, or a `Recorder` given to `launches.begin(recorder=...)`, which
   is what `Frontend` does for the runner): during the candidate's forward call we keep, for each launch of
   a kernel defined in the candidate's module, the kernel and its launch arguments as passed
   (positional and keyword, meta-parameters such as BLOCK sizes and num_warps included), each tensor
   replaced by a `TensorArg` (dtype, 16-byte alignment: all Triton specializes a pointer on). The hook
   wraps `InterpretedFunction.run(self, *args, grid, warmup, **kwargs)`, which has that shape in
   Triton 3.6 and 3.9, and keeps the arguments *unbound*: binding and specialization are left to
   Triton itself at check time, so nothing here depends on how a version binds them. A `@triton.jit`
   function called directly from host code (a GPU raises; the interpreter runs it) is recorded too.

2. Check (`frontend_check`): for each recorded launch, build a throwaway `JITFunction` from the kernel's
   Python function (its `@triton.jit` helpers likewise) and replay the launch through
   `JITFunction.run(..., warmup=True)` for a fake CUDA sm_90 target, with a `compile` that stops after
   the front end (the kernel's cache-key hash, then `ASTSource.make_ir`, i.e. TTIR; no ptxas, no CUDA),
   in the order `triton.compiler.compile` runs them. Binding, specialization (``i32`` /
   ``i64``, ``constexpr`` for 1, divisibility by 16), option parsing and code generation are Triton's own
   code, so what comes back is the object a GPU launch would raise (`CompilationError` carrying the
   kernel source and AST node, `TypeError: failed to specialize ...`, `KeyError: Keyword argument ...`),
   which `classify()` maps to the candidate's line.

Interpreter mode changes triton.language itself, and the front end needs it as compiled mode has it:
- its own `@jit` library functions (`tl.zeros`, `tl.sum`, `tl.cdiv`, the `x.sum()` tensor methods...)
  are InterpretedFunctions: swapped for JITFunctions while a check runs;
- `InterpretedFunction.__call__` (a kernel calling a helper, or `tl.zeros`) patches the language for
  the interpreter and never restores it (3.6 and 3.9), so builtins of `triton.language.core` stay
  patched after the first kernel that used `tl.zeros`: a snapshot of the clean language, taken by
  `install()` (before any candidate runs), is put back while a check runs.
Everything swapped is restored in a ``finally``, as is the active driver (the only other global
touched) and the 3.9 registry of JIT functions by name; `triton.compiler.compile` is not patched.

A failure of this machinery (a Triton API that moved) is never reported as the candidate's error:
`frontend_check` returns `FrontendUnavailable(reason)` instead. A self-test (a valid kernel must
compile, an invalid one must not) guards each process once.

Not covered (a front-end compile cannot see them): later compiler stages (TTGIR/LLVM passes, ptxas),
limits checked when the binary loads (shared memory, registers) and run-time faults.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

TARGET = ("cuda", 90, 32)  # the GPU host's: H200, sm_90, warp size 32
MAX_RECORDED = 256  # distinct launches kept per forward call (a kernel in a loop: once per argument set)
DEFAULT_BUDGET_S = 20.0
# Errors Triton's autotuner absorbs for one config (it times that config as infinitely slow).
AUTOTUNE_PRUNED = frozenset({"OutOfResources", "CompileTimeAssertionFailure", "PTXASError"})
_INSTALLED = "_adaexplore_frontend_hook"
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_MISSING = object()

_state = threading.local()
tl: Any = None  # triton.language, imported on first use (the self-test kernel reads it as a global)


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

    def __call__(self, kernel: Any, args: tuple, kwargs: dict) -> None:
        try:
            if not kwargs.get("warmup", False):
                self.add(record_launch_args(kernel, args, kwargs, kwargs.get("grid"), _from_autotuner()))
        except Exception:  # noqa: BLE001 - recording must never break a launch
            pass

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


def begin(module_name: str) -> None:
    """Start recording launches of kernels defined in `module_name` ("*": every kernel); needs `install()`."""
    _state.recorder = Recorder(None if module_name == "*" else module_name)


def end() -> list[Launch]:
    """Stop recording; the distinct launches since `begin`, in launch order."""
    recorder = getattr(_state, "recorder", None)
    _state.recorder = None
    return recorder.close() if recorder is not None else []


class Frontend:
    """For a runner that records through `launches.begin(recorder=...)`:

        recorder = frontend.recorder()                 # before the forward call
        launches.begin(module, recorder=recorder)
        ... forward ...
        problem = frontend.check(recorder)             # the GPU's exception, or None

    `check` returns only the candidate's errors; when the check could not run it returns None and leaves
    the reason in `unavailable` (for `unconfirmed`). Launches that passed are not compiled again."""

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S) -> None:
        install()
        self.budget_s = budget_s
        self.unavailable: FrontendUnavailable | None = None
        self.last: FrontendReport | None = None
        self._passed: set = set()

    def recorder(self) -> Recorder:
        rec = Recorder()
        _state.direct = rec  # a jit function called from host code lands here (launches sees launches only)
        return rec

    def check(self, recorder: Recorder) -> BaseException | None:
        if getattr(_state, "direct", None) is recorder:
            _state.direct = None
        todo = [la for la in recorder.close() if la.error is not None or _launch_key(la) not in self._passed]
        report = check_launches(todo, self.budget_s)
        self.last, self.unavailable = report, report.unavailable
        if report.error is None and report.unavailable is None:
            if len(self._passed) > 4096:
                self._passed.clear()
            self._passed.update(_launch_key(la) for la in todo)
        return report.error


# ================================================================================================ language

_SNAPSHOT: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(owner) -> (module or class, its clean __dict__)
_SNAPSHOT_DIRTY: list[str] = []


def _language_owners() -> list[Any]:
    """triton.language's modules and the classes they define."""
    owners: dict[int, Any] = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "triton.language" or name.startswith("triton.language.")):
            continue
        owners[id(mod)] = mod
        for value in list(vars(mod).values()):
            if isinstance(value, type) and getattr(value, "__module__", "").startswith("triton.language"):
                owners[id(value)] = value
    return list(owners.values())


def _from_interpreter(value: Any, name: str = "") -> bool:
    """A value the interpreter's language patching puts in place."""
    if name == "static_print" and value is print:
        return True
    for v in (value, getattr(value, "fget", None), getattr(value, "func", None)):
        code = getattr(v, "__code__", None)
        if code is not None and code.co_filename.endswith(os.sep + "interpreter.py"):
            return True
    return False


def _injected(name: str, value: Any) -> bool:
    """A helper of the interpreter's own that its function rewriter leaves in a module's globals
    under its own name (not a patch of anything triton.language defines)."""
    return getattr(value, "__name__", None) == name and \
        getattr(value, "__module__", "") == "triton.runtime.interpreter"


def _original(owner: Any, name: str, value: Any) -> Any:
    """The compiled-mode value behind an interpreter patch found in `owner.name`, or _MISSING.

    The interpreter wraps a builtin as `lambda *a, member=original, **k: ...`; its other patches of a
    module (`range`, `static_range`, `static_assert`...) replace names that `triton.language` re-exports
    from `triton.language.core`, which the enclosing launch does restore in `triton.language`."""
    kw = getattr(value, "__kwdefaults__", None) or {}
    if "member" in kw:
        return kw["member"]
    if isinstance(owner, types.ModuleType):
        lang = sys.modules.get("triton.language")
        alt = vars(lang).get(name, _MISSING) if lang is not None and lang is not owner else _MISSING
        if alt is not _MISSING and not _from_interpreter(alt, name):
            return alt
    return _MISSING


def _snapshot_language() -> None:
    """Remember triton.language as compiled mode has it (owners seen later are added as they come).

    Taken by `install()` before any kernel runs it is clean; taken later it may hold what the
    interpreter leaked (`InterpretedFunction.__call__` patches `triton.language.core` for good), which
    is mapped back to the originals."""
    import triton.language  # noqa: F401

    for owner in _language_owners():
        if id(owner) in _SNAPSHOT:
            continue
        clean = dict(vars(owner))
        for name, value in list(clean.items()):
            if _injected(name, value):
                continue
            if _from_interpreter(value, name):
                original = _original(owner, name, value)
                if original is _MISSING:
                    _SNAPSHOT_DIRTY.append(f"{getattr(owner, '__name__', owner)}.{name}")
                else:
                    clean[name] = original
        _SNAPSHOT[id(owner)] = (owner, clean)


# ================================================================================================ check

class _Machinery(Exception):
    """The check machinery failed (not the candidate)."""


class _Accepted:
    """Stands in for a compiled kernel in the throwaway JITFunction's kernel cache."""


_ACCEPTED = _Accepted()
_LIBRARY_JITS: dict[Any, Any] = {}  # triton's own library functions -> JITFunction (built once)


class _FakeCudaDriver:
    def __init__(self, target: Any) -> None:
        self._target = target

    def get_current_target(self) -> Any:
        return self._target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")


def _frontend_compile(src: Any, target: Any = None, options: Any = None, **_: Any) -> Any:
    """`triton.compiler.compile`, the same calls, stopped after `make_ir` (the front end: AST -> TTIR).

    Not called: `get_cache_key`'s backend part (the CUDA backend's hash asks ptxas for its version)."""
    try:
        from triton._C.libtriton import ir
        from triton.compiler.compiler import make_backend

        backend = make_backend(target)
        opts = backend.parse_options(dict(options or {}, **src.parse_options()))
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        codegen_fns = backend.get_codegen_implementation(opts)
        module_map = backend.get_module_map()
    except Exception as exc:  # noqa: BLE001
        raise _Machinery(f"setting up the front end failed: {type(exc).__name__}: {exc}") from exc
    # compile() computes the cache key before the IR: the kernel's hash walks the names it uses
    # (DependenciesFinder), which rejects some of them first (`Unsupported function referenced`).
    src.hash()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # a module that fails to verify is printed
            src.make_ir(target, opts, codegen_fns, module_map, context)
    except Exception as exc:
        _filter_traceback(exc)
        raise
    return _ACCEPTED


def _filter_traceback(exc: BaseException) -> None:
    """What compile()'s `filter_traceback` does (drop code_generator.py and ast.py frames), once per exception.

    Triton's own recurses into both `__cause__` and `__context__`, which are the same exception for
    `raise ... from e`: exponential in the chain's length, so a recursive kernel (a chain hundreds of
    CompilationErrors deep) never returns from it."""
    try:
        from triton import knobs

        if knobs.compilation.front_end_debugging:
            return
    except Exception:  # noqa: BLE001
        pass
    bad = tuple(b.replace("/", os.sep) for b in ("/triton/compiler/code_generator.py", "/ast.py"))
    todo, done = [exc], set()
    while todo:
        e = todo.pop()
        if id(e) in done:
            continue
        done.add(id(e))
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
        frames = []
        tb = e.__traceback__
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.endswith(bad):
                frames.append(tb)
            tb = tb.tb_next
        for cur, nxt in zip(frames, frames[1:]):
            cur.tb_next = nxt
        if frames:
            frames[-1].tb_next = None
        e.__traceback__ = frames[0] if frames else None


def _interpreted_call_guard(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise _Machinery(f"the interpreted function {getattr(self, '__name__', '?')} was called while compiling "
                     "(a @triton.jit function the checker did not swap for a JITFunction)")


def _jit_options(obj: Any, jit_cls: type) -> dict[str, Any]:
    """Decorator options of an InterpretedFunction (its `kwargs`) or a JITFunction (its attributes)."""
    accepted = set(inspect.signature(jit_cls.__init__).parameters) - {"self", "fn"}
    if isinstance(getattr(obj, "kwargs", None), dict):
        opts = dict(obj.kwargs)
    else:
        opts = {"version": getattr(obj, "version", None), "do_not_specialize": getattr(obj, "do_not_specialize", None),
                "do_not_specialize_on_alignment": getattr(obj, "do_not_specialize_on_alignment", None),
                "debug": getattr(obj, "debug", None), "noinline": getattr(obj, "noinline", None),
                "repr": getattr(obj, "_repr", None), "launch_metadata": getattr(obj, "launch_metadata", None)}
    return {k: v for k, v in opts.items() if k in accepted}


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _wrapped_interpreted(value: Any, interp_cls: type) -> Any:
    """The InterpretedFunction behind a value: itself, or inside `core._tensor_member_fn`'s `wrapper`."""
    if isinstance(value, interp_cls):
        return value
    if isinstance(value, types.FunctionType) and value.__closure__ and value.__code__.co_name == "wrapper":
        found = [c.cell_contents for c in value.__closure__
                 if _cell_filled(c) and isinstance(c.cell_contents, interp_cls)]
        if len(found) == 1:
            return found[0]
    return None


class _Session:
    """One check: fake driver, compiled-mode language, throwaway JITFunctions; `close()` undoes it all."""

    def __init__(self) -> None:
        import triton.runtime.jit as jit_mod
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver

        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:  # pragma: no cover
            InterpretedFunction = None  # noqa: N806
        self.jit_cls = jit_mod.JITFunction
        self.interp_cls = InterpretedFunction
        self.driver = driver
        self.registry = getattr(jit_mod, "_triton_jit_function_registry", None)
        self.saved_registry = dict(self.registry) if isinstance(self.registry, dict) else None
        self.saved_active = driver.__dict__.get("_active", _MISSING)
        self.target = GPUTarget(*TARGET)
        self.jits: dict[Any, Any] = {}  # python function -> throwaway JITFunction
        self.scopes: dict[int, dict] = {}  # id(globals) -> translated copy
        self.patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, original or _MISSING)
        try:
            driver.set_active(_FakeCudaDriver(self.target))
            self._compiled_mode_language()
        except Exception:
            self.close()
            raise

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self.patched.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, value)

    def _compiled_mode_language(self) -> None:
        if self.interp_cls is None:
            return
        _snapshot_language()
        if _SNAPSHOT_DIRTY:
            raise _Machinery("triton.language was already patched by the interpreter when first seen "
                             f"({', '.join(_SNAPSHOT_DIRTY[:3])}): call frontend.install() before any kernel runs")
        # 1. undo what the interpreter left patched
        for owner, clean in _SNAPSHOT.values():
            current = vars(owner)
            for name, value in clean.items():
                if current.get(name, _MISSING) is not value:
                    self._set(owner, name, value)
            for name in [n for n, v in current.items() if n not in clean and _from_interpreter(v, n)]:
                self.patched.append((owner, name, current[name]))
                delattr(owner, name)
        # 2. triton.language's own @jit functions as compiled mode has them
        for owner in _language_owners():
            for name, value in list(vars(owner).items()):
                inner = _wrapped_interpreted(value, self.interp_cls)
                if inner is not None:
                    self._set(owner, name, self.jit_for(inner))
        # 3. an interpreted function reached while compiling is the checker's bug, not the candidate's
        self._set(self.interp_cls, "__call__", _interpreted_call_guard)

    def close(self) -> None:
        while self.patched:
            owner, name, original = self.patched.pop()
            if original is _MISSING:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, original)
        if self.saved_active is _MISSING:
            self.driver.__dict__.pop("_active", None)
        else:
            self.driver._active = self.saved_active
        if self.saved_registry is not None and isinstance(self.registry, dict):
            self.registry.clear()
            self.registry.update(self.saved_registry)
        self.jits.clear()
        self.scopes.clear()

    # -- kernels and helpers as JITFunctions

    def jit_for(self, obj: Any) -> Any:
        fn = getattr(obj, "fn", obj)
        jit = self.jits.get(fn) or _LIBRARY_JITS.get(fn)
        if jit is not None:
            return jit
        jit = self.jit_cls(fn, **_jit_options(obj, self.jit_cls))
        if getattr(fn, "__module__", "").startswith("triton."):
            _LIBRARY_JITS[fn] = jit  # its globals are the (patched-in-place) language modules themselves
            return jit
        self.jits[fn] = jit  # before translating its scope: a kernel may call itself
        scope = self.translate_scope(fn)
        jit.__globals__ = scope
        jit.get_capture_scope = lambda: scope  # where 3.6 and 3.9 code generators read names from
        return jit

    def translate_scope(self, fn: Any) -> dict:
        """fn's globals (and closure values) with interpreted jit functions swapped for JITFunctions."""
        g = fn.__globals__
        base = self.scopes.get(id(g))
        if base is None:
            base = dict(g)
            self.scopes[id(g)] = base
            for name, value in list(base.items()):
                base[name] = self.translate_value(value)
        if not fn.__closure__:
            return base
        free = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__) if _cell_filled(c)}
        return base | {n: self.translate_value(v) for n, v in free.items()}

    def translate_value(self, value: Any) -> Any:
        if self.interp_cls is not None and isinstance(value, self.interp_cls):
            try:
                return self.jit_for(value)
            except Exception:  # noqa: BLE001 - a helper Triton refuses to wrap: it fails where it is used
                return value
        if type(value) is tuple:
            return tuple(self.translate_value(v) for v in value)
        return value

    # -- one launch

    def check(self, launch: Launch) -> BaseException | None:
        try:
            jit = self.jit_for(launch.kernel)
        except (TypeError, ValueError) as exc:
            return exc  # e.g. `**kwargs` in a kernel: a GPU rejects it at decoration (import) time
        try:
            _ = jit.device_caches[0]  # the binder for the fake target (sets jit.compile)
        except Exception as exc:  # noqa: BLE001
            raise _Machinery(f"creating the launch binder failed: {type(exc).__name__}: {exc}") from exc
        if not hasattr(jit, "compile"):
            raise _Machinery("JITFunction has no per-instance `compile` after creating its binder")
        jit.compile = _frontend_compile
        args = tuple(self.translate_value(a) for a in launch.args)
        kwargs = {k: self.translate_value(v) for k, v in launch.kwargs.items()}
        try:
            jit.run(*args, grid=launch.grid or (1,), warmup=True, **kwargs)
        except _Machinery:
            raise
        except Exception as exc:  # noqa: BLE001 - the candidate's error, unless the checker caused it
            inner = next((e for e in _chain(exc) if isinstance(e, _Machinery)), None)
            if inner is not None:
                raise _Machinery(str(inner)) from exc
            if _raised_here(exc):
                raise _Machinery(f"replaying {launch.name} failed inside the checker: "
                                 f"{type(exc).__name__}: {exc}") from exc
            return exc
        return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not e for e in seen) and len(seen) < 20:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _raised_here(exc: BaseException) -> bool:
    """The innermost frame is this file's (a stand-in or the fake driver), not Triton's or the candidate's."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return (last is not None and last.tb_frame.f_code.co_filename == __file__
            and last.tb_frame.f_code.co_name not in ("check", "_frontend_compile"))


# The self-test: pointers, an int, a float, constexprs, a helper, tl.zeros (a library @jit function),
# tl.static_range over a constexpr. Plain functions here; wrapped in throwaway JITFunctions.
def _selftest_helper(x):
    return x * 2.0


def _selftest_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(STEPS):
        acc += _selftest_helper(tl.load(x_ptr + offs, mask=mask, other=0.0)) * scale
    tl.store(y_ptr + offs, acc + tl.sum(acc, axis=0), mask=mask)


_SELFTEST: dict[str, str | None] = {}


def _selftest(session: _Session) -> str | None:
    """None when the machinery compiles a valid kernel and rejects an invalid one; else why not (cached)."""
    import triton

    if triton.__version__ in _SELFTEST:
        return _SELFTEST[triton.__version__]
    reason: str | None = None
    try:
        import torch

        session.jit_for(_selftest_kernel)
        session.translate_scope(_selftest_kernel)["_selftest_helper"] = session.jit_for(_selftest_helper)
        ptrs = (TensorArg(torch.float32), TensorArg(torch.float32))
        err = session.check(Launch(_selftest_kernel, _selftest_kernel, (*ptrs, 1000, 0.5),
                                   {"BLOCK": 128, "STEPS": 2, "num_warps": 4}))
        if err is not None:
            reason = f"the self-test kernel was rejected: {type(err).__name__}: {str(err).strip()[-300:]}"
        elif session.check(Launch(_selftest_kernel, _selftest_kernel, (*ptrs, 1000, 0.5, 128), {"STEPS": 2.5})) is None:
            reason = "the self-test's invalid kernel (tl.static_range(2.5)) was accepted"
    except _Machinery as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001
        reason = f"self-test failed: {type(exc).__name__}: {exc}"
    finally:
        session.jits.clear()
        session.scopes.clear()
    _SELFTEST[triton.__version__] = reason
    return reason


@dataclass
class FrontendReport:
    """What `check_launches` did: the first error, or why the check could not run, and per-launch times."""

    error: BaseException | None = None
    error_launch: Launch | None = None
    unavailable: FrontendUnavailable | None = None
    checked: list[tuple[str, float]] = field(default_factory=list)  # (kernel name, seconds)
    seconds: float = 0.0

    @property
    def result(self) -> BaseException | FrontendUnavailable | None:
        return self.error if self.error is not None else self.unavailable


def _fail(report: FrontendReport, exc: BaseException, launch: Launch) -> None:
    tb = exc.__traceback__
    if launch.site and not (tb is not None and tb.tb_frame is launch.site[0]):
        exc = _with_site(exc, launch.site)
    report.error, report.error_launch = exc, launch


def check_launches(launches: list[Launch], budget_s: float = DEFAULT_BUDGET_S) -> FrontendReport:
    """Replay `launches` in order through the compiler front end; see `frontend_check`."""
    global tl
    t0 = time.perf_counter()
    report = FrontendReport()
    if not launches:
        return report
    known = next((la for la in launches if la.error is not None), None)
    try:
        import triton.language as tl_mod

        tl = tl_mod
    except Exception as exc:  # noqa: BLE001
        report.unavailable = FrontendUnavailable(f"triton is not importable: {exc}")
        return report
    seen: set = set()
    pruned: dict[int, tuple[BaseException, Launch]] = {}
    tuned_ok: set[int] = set()
    session = None
    try:
        session = _Session()
        reason = _selftest(session)
        if reason is not None:
            raise _Machinery(reason)
        for launch in launches:
            key = _launch_key(launch)
            if key in seen:
                continue
            seen.add(key)
            if launch.error is not None:
                _fail(report, launch.error, launch)
                return report
            if time.perf_counter() - t0 > budget_s:
                report.unavailable = FrontendUnavailable(
                    f"the compiler front-end check stopped after {budget_s:g}s, {len(report.checked)} launch "
                    "configurations checked")
                return report
            t1 = time.perf_counter()
            err = session.check(launch)
            report.checked.append((launch.name, time.perf_counter() - t1))
            if err is None:
                if launch.via_autotuner:
                    tuned_ok.add(id(launch.fn))
            elif launch.via_autotuner and {t.__name__ for t in type(err).__mro__} & AUTOTUNE_PRUNED:
                pruned.setdefault(id(launch.fn), (err, launch))  # the autotuner skips that config
            else:
                _fail(report, err, launch)
                return report
        for fn_id, (err, launch) in pruned.items():
            if fn_id not in tuned_ok:  # no config compiled: the GPU launch fails too
                _fail(report, err, launch)
                return report
        return report
    except _Machinery as exc:
        report.unavailable = FrontendUnavailable(f"compiler front-end check unavailable: {exc}")
    except Exception as exc:  # noqa: BLE001 - the check itself must never break the judge
        report.unavailable = FrontendUnavailable(
            f"compiler front-end check failed internally: {type(exc).__name__}: {exc}")
    finally:
        if session is not None:
            session.close()
        report.seconds = time.perf_counter() - t0
    if known is not None:  # the check could not run, but a recorded host-side error still stands
        _fail(report, known.error, known)
    return report


def frontend_check(launches: list[Launch],
                   budget_s: float = DEFAULT_BUDGET_S) -> BaseException | FrontendUnavailable | None:
    """Compile each distinct recorded launch through Triton's front end for a fake CUDA sm_90 target.

    Returns the first exception a GPU launch would raise (the compiler's own object: give it to
    `classify()`), `FrontendUnavailable(reason)` when the check could not run (put the reason in
    `unconfirmed`; it is not a verdict), or None when every launch compiles. Triton's global state is
    left as it was found.
    """
    return check_launches(launches, budget_s).result


__all__ = ["AUTOTUNE_PRUNED", "Frontend", "FrontendReport", "FrontendUnavailable", "Launch", "Recorder", "TensorArg",
           "begin", "check_launches", "end", "frontend_check", "install", "record_launch_args"]
