"""Compile recorded launches through Triton's real compiler front end: step 2 of the check (check.py).

For each recorded launch, `_Session.check` builds a throwaway `JITFunction` from the kernel's
Python function (its `@triton.jit` helpers likewise) and replays the launch through
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

A failure of this machinery (a Triton API that moved) raises `_Machinery`, never reported as the
candidate's error (check.py turns it into `FrontendUnavailable`).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .record import Launch

_MISSING = object()
# "This file" for `_raised_here`: the front-end check's own modules (its stand-ins, such as TensorArg, and
# the fake driver), which were one file before check.py was split.
_HERE = frozenset(os.path.join(os.path.dirname(__file__), name)
                  for name in ("check.py", "record.py", "compile.py"))


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
    """One check: fake driver, compiled-mode language, throwaway JITFunctions; `close()` undoes it all.

    `target`: the fake GPU's (backend, arch, warp size), frontend.TARGET."""

    def __init__(self, target: tuple) -> None:
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
        self.target = GPUTarget(*target)
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
    return (last is not None and last.tb_frame.f_code.co_filename in _HERE
            and last.tb_frame.f_code.co_name not in ("check", "_frontend_compile"))
