"""Compile what the CPU interpreter ran through Triton's real compiler front end (AST -> TTIR).

Without a GPU, candidates run under Triton's CPU interpreter, which executes a kernel's body as Python
and so accepts code the GPU compiler rejects (a module-level float read inside a kernel,
`tl.static_range` over a runtime bound, `break`, lambdas, unknown launch keywords...). This module
closes that gap in two steps, both in the worker process:

1. Record (`install`, `begin`, `end`): during the candidate's forward call we keep, for each launch of
   a kernel defined in the candidate's module, the kernel and its launch arguments exactly as passed
   (positional and keyword, meta-parameters such as BLOCK sizes and num_warps included), with each
   tensor replaced by a `TensorArg` (dtype, 16-byte alignment: all Triton specializes a pointer on).
   The hook wraps `InterpretedFunction.run(self, *args, grid, warmup, **kwargs)`, which has the same
   shape in Triton 3.6 and 3.9, and stores the arguments *unbound*: binding and specialization are
   left to Triton itself at check time, so nothing here depends on how a version binds them.
   It also makes a `@triton.jit` function called directly from host code (outside a launch) visible,
   and undoes the `triton.language` patching the interpreter leaks in that case.

2. Check (`frontend_check`): for each recorded launch, build a fresh `JITFunction` from the kernel's
   Python function (helpers it calls are rebuilt the same way) and replay the launch through
   `JITFunction.run(..., warmup=True)` for a fake CUDA sm_90 target, whose `compile` stops after the
   front end. Argument binding, specialization (``i32``/``i64``/``constexpr`` for 1, divisibility by
   16), option parsing and code generation are Triton's own code, so the exception that comes back is
   the object a GPU launch would raise (`CompilationError` with the kernel source and AST node,
   `TypeError: failed to specialize...`, `KeyError: Keyword argument ... unrecognised`...), which
   `classify()` maps to the candidate's line. Identical specializations compile once (Triton's own
   kernel cache on the throwaway `JITFunction`).

Nothing global is left changed: the only global touched is the active driver (saved and restored in a
``finally``), plus the 3.9 registry of JIT functions by name (restored too); `triton.compiler.compile`
is not patched (the throwaway `JITFunction` gets its own `compile`). A failure of this machinery (a
Triton API that moved) is never reported as the candidate's error: `frontend_check` returns a
`FrontendUnavailable` with a reason instead. A one-off self-test compile of a known-good kernel guards
every process.

Not covered (a front-end compile cannot see them): errors of later compiler stages (TTGIR/LLVM passes,
ptxas, shared-memory/register limits checked when the binary loads) and run-time faults (illegal
memory access).
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

# The fake target: what the GPU host has (H200, sm_90, warp size 32).
TARGET = ("cuda", 90, 32)
MAX_RECORDED = 256  # distinct launches kept per call (a kernel launched in a loop is recorded once per argument set)
DEFAULT_BUDGET_S = 20.0
_INSTALLED = "_adaexplore_frontend_hook"
# Errors Triton's autotuner swallows for one config (it times that config as infinitely slow).
_AUTOTUNE_PRUNED = frozenset({"OutOfResources", "CompileTimeAssertionFailure", "PTXASError"})

_state = threading.local()
tl: Any = None  # triton.language, imported on first use (the self-test kernel below reads it as a global)


# ---------------------------------------------------------------------------------------------- records

@dataclass(frozen=True)
class TensorArg:
    """A tensor argument as Triton's specialization sees it: a pointer to `dtype`, 16-byte aligned or not."""

    dtype: Any
    aligned: bool = True

    def data_ptr(self) -> int:
        return 0 if self.aligned else 8

    def __repr__(self) -> str:
        return f"TensorArg({str(self.dtype).removeprefix('torch.')}{'' if self.aligned else ', unaligned'})"


@dataclass(frozen=True)
class FrontendUnavailable:
    """The check could not run (not a verdict on the candidate): put `reason` in `unconfirmed`."""

    reason: str

    def __bool__(self) -> bool:  # truthy, like an error, but never an exception
        return True


@dataclass
class Launch:
    """One recorded launch: the kernel object and its arguments as passed, tensors replaced."""

    kernel: Any  # what was launched: an InterpretedFunction (or a JITFunction)
    fn: Any  # the kernel's Python function
    args: tuple
    kwargs: dict
    grid: Any = None  # a tuple, or None when the grid was a callable (not needed to compile)
    via_autotuner: bool = False
    error: BaseException | None = None  # a host-side error already known (a jit function called directly)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "?")

    @property
    def bound(self) -> dict[str, Any]:
        """Kernel parameter name -> recorded value (defaults not applied); meta-parameters excluded."""
        params = inspect.signature(self.fn).parameters
        kw = {k: v for k, v in self.kwargs.items() if k in params}
        try:
            return dict(inspect.signature(self.fn).bind_partial(*self.args, **kw).arguments)
        except TypeError:
            return {**dict(zip(params, self.args)), **kw}

    @property
    def meta(self) -> dict[str, Any]:
        """Launch keywords that are not kernel parameters (num_warps, num_stages, ...)."""
        params = inspect.signature(self.fn).parameters
        return {k: v for k, v in self.kwargs.items() if k not in params}


def _stand_in(value: Any) -> Any:
    """What we keep of one launch argument: tensors become TensorArg; tuples recurse; the rest as is."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        try:
            return TensorArg(value.dtype, value.data_ptr() % 16 == 0)
        except Exception:  # noqa: BLE001 - an odd tensor-like: keep it, specialization will judge it
            return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_stand_in(v) for v in value)
    return value  # dtypes, constexprs, jit functions, lists (Triton rejects those), descriptors...


def _freeze(value: Any) -> Any:
    """A hashable key for a recorded value (for de-duplicating launches)."""
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
    return (id(launch.fn), _freeze(launch.args), _freeze(launch.kwargs), launch.error is not None)


def record_launch_args(kernel: Any, args: tuple, kwargs: dict, grid: Any = None,
                       via_autotuner: bool = False) -> Launch:
    """A Launch for `kernel[grid](*args, **kwargs)` (InterpretedFunction or JITFunction); keeps no tensor."""
    kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    return Launch(kernel=kernel, fn=getattr(kernel, "fn", kernel), args=tuple(_stand_in(a) for a in args),
                  kwargs={k: _stand_in(v) for k, v in kwargs.items()},
                  grid=grid if isinstance(grid, tuple) else None, via_autotuner=via_autotuner)


# ---------------------------------------------------------------------------------------------- recorder

def _keep(launch: Launch) -> None:
    module = getattr(_state, "module", None)
    if module is None or getattr(launch.fn, "__module__", None) != module and module != "*":
        return
    key = _launch_key(launch)
    if key in _state.keys or len(_state.keys) >= MAX_RECORDED:
        _state.dropped += key not in _state.keys
        return
    _state.keys.add(key)
    _state.launches.append(launch)


def _from_autotuner() -> bool:
    f = sys._getframe(2)
    for _ in range(6):
        if f is None:
            return False
        if f.f_code.co_filename.endswith(os.sep + "autotuner.py"):
            return True
        f = f.f_back
    return False


def _candidate_traceback(fn: Any) -> types.TracebackType | None:
    """A traceback of the current stack's frames in `fn`'s file (the candidate), outermost first."""
    path = getattr(getattr(fn, "__code__", None), "co_filename", None)
    tb = None
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename == path:
            tb = types.TracebackType(tb, f, f.f_lasti, f.f_lineno)
        f = f.f_back
    return tb


def _direct_call_error(fn: Any) -> BaseException:
    """What a GPU raises when a @triton.jit function is called from host code, with the candidate's frames."""
    try:
        from triton.runtime.jit import JITFunction

        JITFunction.__call__(None)  # raises RuntimeError("Cannot call @triton.jit'd outside of the scope ...")
        exc: BaseException = RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")
    except Exception as e:  # noqa: BLE001
        exc = e
    return exc.with_traceback(_candidate_traceback(fn))


def _wrap_run(cls: type) -> None:
    original = cls.run
    if getattr(original, _INSTALLED, False):
        return

    def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        if getattr(_state, "module", None) is not None and not warmup:
            try:
                _keep(record_launch_args(self, args, kwargs, grid, _from_autotuner()))
            except Exception:  # noqa: BLE001 - recording must never break a launch
                pass
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            _state.depth -= 1

    setattr(run, _INSTALLED, True)
    cls.run = run  # type: ignore[method-assign]


def _wrap_call(cls: type) -> None:
    """A device-function call outside any launch: record it, and restore the language it patches."""
    original = cls.__call__
    if getattr(original, _INSTALLED, False):
        return

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_state, "depth", 0) > 0:
            return original(self, *args, **kwargs)
        if getattr(_state, "module", None) is not None:
            try:
                launch = record_launch_args(self, args, kwargs)
                launch.error = _direct_call_error(launch.fn)
                _keep(launch)
            except Exception:  # noqa: BLE001
                pass
        scope = None
        try:
            from triton.runtime import interpreter

            scope = interpreter._patch_lang(self.fn)  # records the true originals; restored below
        except Exception:  # noqa: BLE001 - a version without it: nothing to restore
            scope = None
        try:
            return original(self, *args, **kwargs)
        finally:
            if scope is not None:
                scope.restore()

    setattr(call, _INSTALLED, True)
    cls.__call__ = call  # type: ignore[method-assign]


def install() -> None:
    """Hook the interpreter's launch path; idempotent; independent of (and compatible with) launches.py."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported Triton has it
        return
    _wrap_run(InterpretedFunction)
    _wrap_call(InterpretedFunction)


def begin(module_name: str) -> None:
    """Start recording launches of kernels defined in `module_name` ("*": every kernel)."""
    _state.module = module_name
    _state.launches = []
    _state.keys = set()
    _state.dropped = 0


def end() -> list[Launch]:
    """Stop recording; the distinct launches since `begin`, in launch order."""
    out = list(getattr(_state, "launches", []))
    _state.module = None
    _state.launches = []
    _state.keys = set()
    return out


# ---------------------------------------------------------------------------------------------- check

class _Machinery(Exception):
    """The check machinery failed (not the candidate)."""


class _Accepted:
    """Stands in for a compiled kernel in the throwaway JITFunction's cache."""


_ACCEPTED = _Accepted()


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
    """`triton.compiler.compile` cut after the front end: the same calls, up to `make_ir` (TTIR)."""
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
    try:
        src.make_ir(target, opts, codegen_fns, module_map, context)
    except Exception as exc:
        try:
            from triton.compiler.compiler import filter_traceback

            filter_traceback(exc)  # as compile() does
        except Exception:  # noqa: BLE001
            pass
        raise
    return _ACCEPTED


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


class _Session:
    """One check: fake driver active, throwaway JITFunctions; `close()` restores everything."""

    def __init__(self) -> None:
        import triton.runtime.jit as jit_mod
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver

        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:  # pragma: no cover
            InterpretedFunction = ()  # type: ignore[assignment,misc]  # noqa: N806
        self.jit_cls = jit_mod.JITFunction
        self.interp_cls = InterpretedFunction
        self.driver = driver
        self.registry = getattr(jit_mod, "_triton_jit_function_registry", None)
        self.saved_registry = dict(self.registry) if isinstance(self.registry, dict) else None
        self.saved_active = driver.__dict__.get("_active", _MISSING)
        self.target = GPUTarget(*TARGET)
        self.jits: dict[Any, Any] = {}  # python function -> throwaway JITFunction
        self.scopes: dict[int, dict] = {}
        self.patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, original), restored by close()
        driver.set_active(_FakeCudaDriver(self.target))
        try:
            self._compile_language()
        except Exception:
            self.close()
            raise

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self.patched.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def _compile_language(self) -> None:
        """Under TRITON_INTERPRET=1 triton.language's own @jit functions (tl.zeros, tl.sum, tl.cdiv, the
        `x.sum()` methods...) are InterpretedFunctions, which the code generator would run as Python on
        IR values: swap them for JITFunctions (as in compiled mode) while the check runs."""
        if not isinstance(self.interp_cls, type):
            return
        for owner, name, value in _language_interpreted(self.interp_cls):
            self._set(owner, name, self.jit_for(value))
        guard = _interpreted_call_guard
        self._set(self.interp_cls, "__call__", guard)

    def close(self) -> None:
        while self.patched:
            owner, name, original = self.patched.pop()
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

    def is_kernel(self, value: Any) -> bool:
        return isinstance(value, self.interp_cls) or isinstance(value, self.jit_cls)

    def jit_for(self, obj: Any) -> Any:
        fn = getattr(obj, "fn", obj)
        jit = self.jits.get(fn) or _LIBRARY_JITS.get(fn)
        if jit is not None:
            return jit
        jit = self.jit_cls(fn, **_jit_options(obj, self.jit_cls))
        if getattr(fn, "__module__", "").startswith("triton."):
            _LIBRARY_JITS[fn] = jit  # Triton's own library never changes: build its JITFunctions once
        self.jits[fn] = jit  # before translating its scope: a kernel may call itself
        scope = self.translate_scope(fn)
        jit.__globals__ = scope
        jit.get_capture_scope = lambda: scope  # 3.6 and 3.9 codegen read the scope through this
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
        free = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__)
                if _cell_filled(c)}
        return base | {n: self.translate_value(v) for n, v in free.items()}

    def translate_value(self, value: Any) -> Any:
        if isinstance(value, self.interp_cls) and not isinstance(value, self.jit_cls):
            try:
                return self.jit_for(value)
            except Exception:  # noqa: BLE001 - e.g. a helper Triton refuses to wrap: fail where it is used
                return value
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
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
        except Exception as exc:  # noqa: BLE001 - the candidate's error, unless our stand-ins caused it
            inner = next((e for e in _chain(exc) if isinstance(e, _Machinery)), None)
            if inner is not None:
                raise _Machinery(str(inner)) from exc
            if _raised_here(exc):
                raise _Machinery(f"replaying {launch.name} failed inside the checker: "
                                 f"{type(exc).__name__}: {exc}") from exc
            return exc
        return None


_MISSING = object()
_LIBRARY_JITS: dict[Any, Any] = {}


def _interpreted_call_guard(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise _Machinery(f"the interpreted function {getattr(self, '__name__', '?')} was called while compiling "
                     "(a @triton.jit function the checker did not swap for a JITFunction)")


def _language_interpreted(interp_cls: type) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, InterpretedFunction) for triton.language's modules and classes.

    A class attribute may be the `wrapper` that `core._tensor_member_fn` puts on `tensor` around an
    interpreted function (compiled mode puts the JITFunction itself there)."""
    out: dict[tuple[int, str], tuple[Any, str, Any]] = {}
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "triton.language" or mod_name.startswith("triton.language.")):
            continue
        for name, value in list(vars(mod).items()):
            if isinstance(value, interp_cls):
                out[(id(mod), name)] = (mod, name, value)
            elif isinstance(value, type) and getattr(value, "__module__", "").startswith("triton.language"):
                for cname, cvalue in list(vars(value).items()):
                    inner = _wrapped_interpreted(cvalue, interp_cls)
                    if inner is not None:
                        out[(id(value), cname)] = (value, cname, inner)
    return list(out.values())


def _wrapped_interpreted(value: Any, interp_cls: type) -> Any:
    if isinstance(value, interp_cls):
        return value
    if isinstance(value, types.FunctionType) and value.__closure__ and value.__code__.co_name == "wrapper":
        cells = [c.cell_contents for c in value.__closure__ if _cell_filled(c)]
        found = [c for c in cells if isinstance(c, interp_cls)]
        if len(found) == 1:
            return found[0]
    return None


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not e for e in seen) and len(seen) < 20:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _raised_here(exc: BaseException) -> bool:
    """True when the innermost frame of the exception is in this file (a stand-in or the fake driver)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename == __file__ and \
        last.tb_frame.f_code.co_name not in ("check", "_frontend_compile")


def _lang_patched() -> bool:
    """The interpreter left triton.language patched (its builtins replaced by its own lambdas)."""
    try:
        import triton.language as tl_mod

        code = getattr(tl_mod.arange, "__code__", None)
        return code is not None and code.co_filename.endswith("interpreter.py")
    except Exception:  # noqa: BLE001
        return False


# The self-test: a kernel every supported Triton compiles (pointers, an int, a float, a constexpr,
# a helper, tl.static_range over a constexpr). Not decorated: wrapped in a throwaway JITFunction.
def _selftest_helper(x):
    return x * 2.0


def _selftest_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(STEPS):
        acc += _selftest_helper(tl.load(x_ptr + offs, mask=mask, other=0.0)) * scale
    tl.store(y_ptr + offs, acc, mask=mask)


_selftest_result: dict[str, str | None] = {}


def _selftest(session: _Session) -> str | None:
    """None when the machinery compiles a valid kernel and rejects an invalid one; else why not (cached)."""
    import triton

    key = triton.__version__
    if key in _selftest_result:
        return _selftest_result[key]
    reason: str | None = None
    try:
        import torch

        session.jit_for(_selftest_kernel)
        session.translate_scope(_selftest_kernel)["_selftest_helper"] = session.jit_for(_selftest_helper)
        ok = Launch(kernel=_selftest_kernel, fn=_selftest_kernel,
                    args=(TensorArg(torch.float32), TensorArg(torch.float32), 1000, 0.5),
                    kwargs={"BLOCK": 128, "STEPS": 2, "num_warps": 4})
        err = session.check(ok)
        if err is not None:
            reason = f"the self-test kernel was rejected: {type(err).__name__}: {str(err).strip()[-300:]}"
        else:
            bad = Launch(kernel=_selftest_kernel, fn=_selftest_kernel,
                         args=(TensorArg(torch.float32), TensorArg(torch.float32), 1000, 0.5, 128),
                         kwargs={"STEPS": "x"})  # STEPS="x": tl.static_range("x") must not compile
            if session.check(bad) is None:
                reason = "the self-test's invalid kernel was accepted"
    except _Machinery as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001
        reason = f"self-test failed: {type(exc).__name__}: {exc}"
    finally:
        session.jits.clear()
    _selftest_result[key] = reason
    return reason


@dataclass
class FrontendReport:
    """What `check_launches` did: the first error (if any), or why it could not run, and per-kernel times."""

    error: BaseException | None = None
    error_launch: Launch | None = None
    unavailable: FrontendUnavailable | None = None
    checked: list[tuple[str, float]] = field(default_factory=list)  # (kernel name, seconds)
    seconds: float = 0.0

    @property
    def result(self) -> BaseException | FrontendUnavailable | None:
        return self.error if self.error is not None else self.unavailable


def check_launches(launches: list[Launch], budget_s: float = DEFAULT_BUDGET_S) -> FrontendReport:
    """Replay `launches` (in order) through the compiler front end; see `frontend_check`."""
    global tl
    t0 = time.perf_counter()
    report = FrontendReport()
    try:
        import triton.language as tl_mod

        tl = tl_mod
    except Exception as exc:  # noqa: BLE001
        report.unavailable = FrontendUnavailable(f"triton is not importable: {exc}")
        return report
    if _lang_patched():
        report.unavailable = FrontendUnavailable(
            "triton.language was left patched by the interpreter, so the compiler front end cannot run here")
        # A recorded direct call still says what a GPU would raise.
        report.error = next((la.error for la in launches if la.error is not None), None)
        return report
    seen: set = set()
    pruned: dict[Any, tuple[BaseException, Launch]] = {}
    ok_autotuned: set = set()
    session = None
    try:
        session = _Session()
        reason = _selftest(session)
        if reason is not None:
            report.unavailable = FrontendUnavailable(f"compiler front-end check unavailable: {reason}")
            return report
        for launch in launches:
            key = _launch_key(launch)
            if key in seen:
                continue
            seen.add(key)
            if launch.error is not None:
                report.error, report.error_launch = launch.error, launch
                return report
            if time.perf_counter() - t0 > budget_s:
                report.unavailable = FrontendUnavailable(
                    f"compiler front-end check stopped after {budget_s:g}s: {len(report.checked)} of the "
                    "launched kernel configurations were checked")
                return report
            t1 = time.perf_counter()
            err = session.check(launch)
            report.checked.append((launch.name, time.perf_counter() - t1))
            if err is None:
                if launch.via_autotuner:
                    ok_autotuned.add(id(launch.fn))
                continue
            if launch.via_autotuner and _type_names(err) & _AUTOTUNE_PRUNED:
                pruned.setdefault(id(launch.fn), (err, launch))  # the autotuner skips such a config
                continue
            report.error, report.error_launch = err, launch
            return report
        for fn_id, (err, launch) in pruned.items():
            if fn_id not in ok_autotuned:  # every config failed: the GPU launch fails too
                report.error, report.error_launch = err, launch
                return report
        return report
    except _Machinery as exc:
        report.unavailable = FrontendUnavailable(f"compiler front-end check unavailable: {exc}")
        return report
    except Exception as exc:  # noqa: BLE001 - never let the check itself break the judge
        report.unavailable = FrontendUnavailable(
            f"compiler front-end check failed internally: {type(exc).__name__}: {exc}")
        return report
    finally:
        if session is not None:
            session.close()
        report.seconds = time.perf_counter() - t0


def frontend_check(launches: list[Launch], budget_s: float = DEFAULT_BUDGET_S) -> BaseException | FrontendUnavailable | None:
    """Compile each distinct recorded launch through Triton's front end for a fake CUDA sm_90 target.

    Returns the first exception a GPU launch would raise (the compiler's own object: give it to
    `classify()`), `FrontendUnavailable(reason)` when the check could not run (say so in `unconfirmed`;
    not a verdict), or None when every launch compiles. Leaves Triton's global state as it found it.
    """
    return check_launches(launches, budget_s).result


def _type_names(exc: BaseException) -> set[str]:
    return {t.__name__ for t in type(exc).__mro__}


__all__ = ["FrontendReport", "FrontendUnavailable", "Launch", "TensorArg", "begin", "check_launches", "end",
           "frontend_check", "install", "record_launch_args"]

