"""Rebuild the kernels a recorded forward call launched from the source the referee holds (run.py runs them).

Each top-level `def` the program launched is kept at its own line, decorators dropped (an autotuner's or
heuristic's choice is already in the recorded launch arguments), its signature checked to evaluate nothing
but names and constants, then `triton.jit`. The module-level values the kernels read come from the program.
A launched kernel's name bound more than once anywhere in the source is refused: the trials may have launched
another binding of it than the one rebuilt here.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path
from typing import Any

import torch

from ..launches import def_digest
from ..wire import decode_float

_SIGNATURE_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Load, ast.UnaryOp, ast.USub, ast.Subscript, ast.Tuple)


class ReplayError(Exception):
    """The program cannot be replayed (the message is for the candidate's author)."""


# ================================================================================================ kernels

def _check_signature(node: ast.FunctionDef) -> None:
    """Defaults and annotations are evaluated when the `def` runs: only names and constants allowed."""
    exprs = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    exprs += [a.annotation for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs] if a.annotation]
    exprs += [node.returns] if node.returns is not None else []
    for expr in exprs:
        if not all(isinstance(n, _SIGNATURE_NODES) or _constant_arithmetic(n) for n in ast.walk(expr)):
            raise ReplayError(f"kernel {node.name}'s signature computes a value ({ast.unparse(expr)[:60]}): defaults "
                              "and annotations of a @triton.jit function must be constants or names")


def _constant_arithmetic(node: ast.AST) -> bool:
    """Arithmetic on number literals only (`BLOCK: tl.constexpr = 2 * 64`): no object's operator can run. An
    honest kernel with such a default was refused."""
    if isinstance(node, (ast.operator, ast.Load)):
        return True
    if not isinstance(node, ast.BinOp):
        return False
    return all(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.USub, ast.operator, ast.Load)) or
               (isinstance(n, ast.Constant) and type(n.value) in (int, float)) for n in ast.walk(node))


def build_kernels(source: str, kernels: dict[str, Any], module_name: str, tmp: Path) -> dict[str, Any]:
    """The launched kernels (and the helpers they call), rebuilt from `source` with only their `def`s."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ReplayError(f"the candidate's source does not parse: {exc}") from None
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    _refuse_rebound(tree, set(kernels))
    lines = source.splitlines()
    kept = [""] * len(lines)  # every def at its own line: Triton's cache key counts its first line, so the
    for name in kernels:      # kernels the candidate's runner compiled (kernel_cache.py) are found, not rebuilt
        node = defs.get(name)
        if node is None:
            raise ReplayError(f"kernel {name!r} launched, but no function of that name is defined at the top level "
                              "of the candidate's source; define every @triton.jit kernel at module level")
        _check_signature(node)
        if (kernels.get(name) or {}).get("__ast__") != def_digest(node):
            raise ReplayError(f"the kernel that ran as {name[:60]!r} is not the top-level def of that name in the "
                              "source (its code differs: made by exec, or its function or source replaced at run "
                              "time); launch the kernels the source defines")
        kept[node.lineno - 1:node.end_lineno] = lines[node.lineno - 1:node.end_lineno]
        if node.decorator_list:  # the key counts from the first decorator's line: a no-op one stands there
            first = node.decorator_list[0].lineno - 1
            kept[first] = lines[first][:len(lines[first]) - len(lines[first].lstrip())] + "@_replay_as_is"
    path = tmp / f"{module_name}_replay.py"
    path.write_text("\n".join(kept) + "\n")
    import triton
    import triton.language as tl

    module = types.ModuleType(f"{module_name}_replay")
    module.__file__ = str(path)
    module.__dict__.update(triton=triton, tl=tl, _replay_as_is=lambda fn: fn)
    sys.modules[module.__name__] = module
    later = _install_globals(kernels, defs, module)  # before the defs run: a default may read one
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - only checked defs
    for name in kernels:
        setattr(module, name, triton.jit(getattr(module, name), **_jit_options(defs[name])))
    for ref, target in later:  # other @jit functions, once they exist
        setattr(module, ref, getattr(module, target))
    return {name: getattr(module, name) for name in kernels}


def _bound_names(node: ast.stmt) -> list[str]:
    """The module-level names a top-level statement binds (a def, a class, an import, an assignment)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [i.optional_vars for i in node.items if i.optional_vars]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at module level: the top level and the bodies of its if/for/while/try/with/match
    blocks (not function or class bodies)."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                found += _module_level([n for n in inner if isinstance(n, ast.stmt)])
        for part in [*(getattr(node, "handlers", None) or []), *(getattr(node, "cases", None) or [])]:
            found += _module_level(part.body)
    return found


def _refuse_rebound(tree: ast.Module, launched: set[str]) -> None:
    """A launched kernel's name bound more than once: which binding ran in the trials is unknown here (a first
    `def` that only copies, launched through an alias; a nested function, a class attribute or a `def` in an
    `if` block of the same name). Launches are recorded by the function's name, so any second function or class
    of that name anywhere, any second module-level binding, a `global` of it or an assignment expression
    counts."""
    counts: dict[str, int] = {}
    module_level = _module_level(tree.body)
    for node in module_level:
        for name in set(_bound_names(node)) & launched:
            counts[name] = counts.get(name, 0) + 1
    counted = {id(n) for n in module_level}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in counted:
            names = [node.name]
        elif isinstance(node, ast.Global):
            names = list(node.names)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        for name in set(names) & launched:
            counts[name] = counts.get(name, 0) + 1
    twice = sorted(n for n, c in counts.items() if c > 1)
    if twice:
        raise ReplayError(f"the name {twice[0][:60]!r} of a launched kernel is bound more than once in the source "
                          "(a second function, class or assignment of that name), so the judge cannot tell which "
                          "one ran; give every @triton.jit kernel a name of its own")


def _install_globals(kernels: dict[str, Any], defs: dict[str, ast.FunctionDef], module: Any) -> list[tuple[str, str]]:
    """Each module-level value a kernel really reads; returns the references to other kernels, for later."""
    later = []
    for name, entry in kernels.items():
        reads = _global_reads(defs[name])
        for ref, desc in (entry or {}).items():
            if ref not in reads:  # an attribute's name (`tl.load` lists `load`), or shadowed by a local
                continue
            if isinstance(desc, dict) and "unsupported" in desc:
                raise ReplayError(f"kernel {name} reads the module-level name {ref!r}, a "
                                  f"{str(desc['unsupported'])[:60]}, which the replay cannot rebuild; a kernel may "
                                  "read numbers, tl.constexpr values, Triton's modules and other @triton.jit functions")
            if isinstance(desc, dict) and "kernel" in desc:
                if str(desc["kernel"]) not in kernels:
                    raise ReplayError(f"kernel {name} calls {str(desc['kernel'])[:60]!r}, which the program does not list")
                later.append((ref, str(desc["kernel"])))
            else:
                setattr(module, ref, _global(desc))
    return later


JIT_OPTIONS = ("do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline")


def _jit_options(node: ast.FunctionDef) -> dict[str, Any]:
    """The literal options of its `@triton.jit(...)` (`noinline`, `do_not_specialize`...): they change what is
    compiled, and so the cache key. Anything but a literal (a `repr` callable) is left out."""
    for dec in node.decorator_list:
        func = dec.func if isinstance(dec, ast.Call) else None
        if getattr(func, "attr", None) == "jit" or getattr(func, "id", None) == "jit":
            options = {}
            for kw in dec.keywords:  # type: ignore[union-attr]
                if kw.arg in JIT_OPTIONS:
                    try:
                        options[kw.arg] = ast.literal_eval(kw.value)
                    except ValueError:
                        continue
            return options
    return {}


def _global_reads(node: ast.FunctionDef) -> set[str]:
    """Names a kernel's body and signature read that are not its own (arguments or assigned names). Its
    decorators are not walked: they are dropped (an autotuner's `configs=CONFIGS` is never evaluated here)."""
    args = node.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    parts: list[ast.AST] = [*node.body, args] + ([node.returns] if node.returns is not None else [])
    names = [n for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)]
    local |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return {n.id for n in names if isinstance(n.ctx, ast.Load)} - local


def _global(desc: Any) -> Any:
    import triton.language as tl

    if not isinstance(desc, dict) or len(desc) != 1:
        raise ReplayError(f"bad global in the program: {str(desc)[:60]}")
    (kind, value), = desc.items()
    if kind == "value":
        return _scalar(value)
    if kind == "constexpr":
        return tl.constexpr(_scalar(value))
    if kind == "tl_dtype":
        return tl.dtype(str(value))
    if kind == "constexpr_dtype":
        return tl.constexpr(tl.dtype(str(value)))
    if kind in ("module", "attr"):
        return language_object(value if kind == "module" else value[0], [] if kind == "module" else value[1])
    raise ReplayError(f"bad global kind {kind[:20]!r}")


def language_object(module: Any, path: Any) -> Any:
    """`module.path` (a dotted path), when every step stays in Triton's language or math (compile_guard's rule):
    the program names it, and a candidate forged one that reached `pickle.load` through a module Triton imports."""
    from .. import compile_guard

    name, parts = str(module), str(path).split(".") if path else []
    if not compile_guard.module_allowed(name) or any(not p.isidentifier() or p.startswith("_") for p in parts):
        raise ReplayError(f"a kernel reads {'.'.join([name, *parts])[:80]!r}: only Triton's language and math are "
                          "replayed")
    try:
        target = importlib.import_module(name)
        for i, part in enumerate(parts):
            target = getattr(target, part)
            compile_guard.check_value(target, ".".join([name, *parts[:i + 1]]))
    except (ImportError, AttributeError, compile_guard.CompileGuardError) as exc:
        raise ReplayError(f"a kernel reads {'.'.join([name, *parts])[:80]!r}, which the replay refuses: "
                          f"{str(exc)[:120]}") from None
    return target


NAMESPACES = ("aten", "prims")
# Operators that reach outside their tensors: a file mapped into a tensor kept state from one run to the next
# (and wrote the replay's Triton cache), so the runs could tell each other apart; `set_`
# grew a storage into memory an earlier run had freed, unfilled.
REFUSED_OPS = frozenset({"from_file", "_print", "set_"})


def _op(name: str) -> Any:
    namespace, _, rest = str(name).partition("::")
    if namespace not in NAMESPACES or not rest:
        raise ReplayError(f"the forward call ran operator {str(name)[:60]!r}; only ATen operators (and the "
                          "candidate's Triton kernels) are replayed")
    base, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    except (AttributeError, RuntimeError):
        op = None
    if not isinstance(op, torch._ops.OpOverload) or base.startswith("__"):  # the program names it: nothing else
        raise ReplayError(f"unknown operator {str(name)[:60]!r}")
    if base in REFUSED_OPS:
        raise ReplayError(f"the forward call ran operator {str(name)[:60]!r}, which reaches outside its tensors "
                          "(files, the console, another tensor's memory); the replay does not run it")
    return op


DESCRIPTOR_CLASSES = {("triton.tools.tensor_descriptor", "TensorDescriptor")}  # what `triton_obj` may rebuild


def descriptor(kind: Any, fields: dict[str, Any]) -> Any:
    """A host-side TMA TensorDescriptor around the replay's own tensors. Only that class, with only its own
    fields: the program names what to build, and a forged one called `pickle.load` with arguments of its
    choosing in the process that decides the verdict."""
    import dataclasses

    key = tuple(str(k) for k in list(kind or [])[:2])
    if key not in DESCRIPTOR_CLASSES:
        raise ReplayError(f"a launch argument of type {'.'.join(key)[:80]!r}: only Triton's TensorDescriptor is replayed")
    cls = getattr(importlib.import_module(key[0]), key[1])
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    if not set(fields) <= names:
        raise ReplayError(f"a TensorDescriptor with fields {sorted(set(fields) - names)[:4]} it does not have")
    return cls(**fields)


def option_value(v: Any) -> bool:
    """A launch option's value: a number, a flag, None, or numbers (`num_warps=4`, `cluster_dims=(2, 1, 1)`)."""
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (bool, int)) for x in v)
    return isinstance(v, (bool, int, float, type(None)))


def _scalar(v: Any) -> Any:
    return decode_float(v) if isinstance(v, dict) and "float" in v else v


def triton_dtype(name: Any) -> Any:
    """A Triton dtype passed to a launch (`COMPUTE=tl.float32`, record.py), rebuilt by its name ("fp32")."""
    import triton.language as tl

    try:
        return tl.dtype(str(name))
    except (AssertionError, ValueError, TypeError, KeyError):
        raise ReplayError(f"bad Triton dtype in the program: {str(name)[:20]}") from None


def _torch_attr(name: Any, kind: type | tuple[type, ...]) -> Any:
    """`torch.<name>` when it is a `kind` (a dtype, a memory format, a layout); else the program is bad."""
    value = getattr(torch, str(name), None)
    if not isinstance(value, kind):
        raise ReplayError(f"the program names {str(name)[:40]!r} where a torch {getattr(kind, '__name__', 'enum')} goes")
    return value


