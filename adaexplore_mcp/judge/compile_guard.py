"""Keep a kernel's compile inside Triton's language: no Python outside it is reached or called on the host.

Why: Triton's code generator evaluates parts of a kernel's body in Python while it compiles: attribute chains
(`tl.core.builtins`), calls of whatever they reach (a builtin's arguments are unwrapped and it is called:
`tl.core.builtins.exec("...")` runs), subscripts of Python containers. On a GPU the replay (replay/run.py)
compiles the candidate's kernels in the process whose runs decide whether its kernels do the work, and whose
compiled launchers later replays reuse (referee.keep_launchers): a kernel body that reached `exec` there
would forge those runs. Installed in the replay's process before anything of the
candidate's is compiled, and in the CPU front-end check (frontend/compile.py), so a candidate learns at the
kernel's line, in its own runner, what the replay would refuse.

What a compile may reach (each value a node evaluates to is checked, and the contents of Python containers):
Triton's language (`triton.language` and its submodules: its builtins, libdevice, its classes and their methods;
not its plain helpers, `tl.str_to_ty` evaluates a string), `math`, `triton.cdiv` and
`triton.next_power_of_2`,
the builtins the code generator offers (`range`, `getattr`...), plain numbers, strings and containers and the
methods of theirs that only read (`PLAIN_READS`), compiled @jit functions and Triton's IR values. Refused:
attributes and global names starting with an underscore (`__class__`, `__builtins__`), any other module,
function or class (`builtins.exec`, `os.system`, a @jit function's Python `fn`, `JITFunction.run`), other methods
of plain values (`str.format` walks attributes and items, underscores included, and reached `ctypes.cdll[path]`), and
`getattr`/`hasattr` with such a name. An honest kernel reads none of these.
"""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any

LANGUAGE = "triton.language"
SCALARS = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis), slice, range)
PLAIN = (*SCALARS, tuple, list, dict)
CONTAINER_LIMIT = 4096  # a kernel's compile-time containers are tiny; a larger one is not walked, but refused


class CompileGuardError(Exception):
    """A kernel reached Python outside Triton's language while it compiled (the message names what)."""


def module_allowed(name: str) -> bool:
    return name in ("math", "triton", LANGUAGE) or name.startswith(LANGUAGE + ".")


PLAIN_METHOD = "<a method of a plain value>"
PLAIN_READS = frozenset({"get", "keys", "values", "items", "index", "count", "startswith", "endswith", "lower", "upper",
                         "strip", "lstrip", "rstrip", "split", "rsplit", "join", "replace", "find", "rfind",
                         "isdigit", "isidentifier", "bit_length", "is_integer", "conjugate"})


def _owner_module(value: Any) -> str:
    """The module a callable or class comes from; for a method of an object, that object's type's module."""
    if isinstance(value, types.BuiltinFunctionType):  # a C function: `os.system` (owner a module) or `{}.get`
        owner = value.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            return value.__module__ or getattr(owner, "__name__", "") or ""
        if isinstance(owner, PLAIN):  # only methods that read: `str.format` walks attributes and items itself,
            return PLAIN_METHOD if value.__name__ in PLAIN_READS else "builtins"  # underscores included
        return type(owner).__module__
    if isinstance(value, types.MethodType):
        return getattr(value.__func__, "__module__", "") or ""
    return getattr(value, "__module__", "") or ""


TRITON_HELPERS = frozenset({"cdiv", "next_power_of_2"})  # `triton.cdiv(N, BLOCK)` on constexprs
CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, types.WrapperDescriptorType,
             types.MethodWrapperType, types.MethodDescriptorType, types.ClassMethodDescriptorType)
# Triton's values, @jit functions (and their methods bound to a value, which the generator makes), IR values
INSTANCE_MODULES = ("triton.language", "triton.runtime.jit", "triton.compiler.code_generator", "triton._C.")


def check_value(value: Any, what: str, depth: int = 0) -> None:
    """Raise CompileGuardError when `value` is outside what a compile may reach (module docstring)."""
    if isinstance(value, SCALARS):
        return
    if any(value is b for b in _BUILTINS_OFFERED.values()):
        return
    if isinstance(value, (tuple, list, dict)):
        items = list(value.values()) if isinstance(value, dict) else list(value)
        if len(items) > CONTAINER_LIMIT or depth > 8:
            raise CompileGuardError(f"{what} is a container too large or deep to check at compile time")
        for item in items:
            check_value(item, what, depth + 1)
        return
    if isinstance(value, types.ModuleType):
        if not module_allowed(value.__name__):
            raise CompileGuardError(f"{what} reaches the module {value.__name__!r}, outside Triton's language")
        return
    if isinstance(value, CALLABLES):
        origin = _owner_module(value)
        if origin in ("math", PLAIN_METHOD):
            return
        if isinstance(value, types.FunctionType) and origin.startswith(LANGUAGE):  # a function, not a method of a
            if getattr(value, "__triton_builtin__", False) or origin.endswith("libdevice"):  # Triton value or a class
                return
            raise CompileGuardError(f"{what} reaches {_describe(value)}, a helper of Triton's, not its language "
                                    "(`tl.str_to_ty` evaluates a string)")
        if module_allowed(origin) and origin != "triton":
            return
        if origin == "triton" and getattr(value, "__name__", "") in TRITON_HELPERS:
            return
        raise CompileGuardError(f"{what} reaches {_describe(value)}, outside Triton's language")
    if not type(value).__module__.startswith(INSTANCE_MODULES):
        raise CompileGuardError(f"{what} reaches {_describe(value)}, outside Triton's language")
    inner = getattr(value, "value", None) if type(value).__name__ == "constexpr" else None
    inner = getattr(value, "values", None) if type(value).__name__ == "tuple" else inner
    if inner is not None:  # a constexpr or a Triton tuple holds Python values
        check_value(inner, what, depth + 1)


def _describe(value: Any) -> str:
    if isinstance(value, CALLABLES):
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
        return f"{_owner_module(value)}.{name}"[:120]
    return f"a {type(value).__module__}.{type(value).__qualname__}"[:120]


def check_node(node: ast.AST) -> None:
    """What a node names, before it is evaluated: no underscore attribute, no dunder name."""
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise CompileGuardError(f"the attribute {node.attr[:60]!r} (names starting with '_' are not Triton's language)")
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        raise CompileGuardError(f"the name {node.id[:60]!r} (names starting with '__' are not Triton's language)")


def _checked_name(builtin: str, name: Any) -> str:
    if not isinstance(name, str) or name.startswith("_"):
        raise CompileGuardError(f"{builtin} of {str(name)[:60]!r} (names starting with '_' are not Triton's language)")
    return name


def _guarded_getattr(obj: Any, name: Any, *default: Any) -> Any:
    found = getattr(obj, _checked_name("getattr", name), *default)
    check_value(found, f"getattr(..., {name[:60]!r})")
    return found


def _guarded_hasattr(obj: Any, name: Any) -> bool:
    return hasattr(obj, _checked_name("hasattr", name))


_BUILTINS_OFFERED: dict[str, Any] = {}
_installed: list[tuple[Any, str, Any]] = []  # (owner, attribute, original), to undo


def install() -> None:
    """Guard Triton's code generator in this process (idempotent). The generator's `visit` checks each node
    before it is evaluated and what it evaluates to; its `getattr`/`hasattr` builtins refuse underscore names."""
    if _installed:
        return
    from triton.compiler import code_generator

    generator = code_generator.CodeGenerator
    namespace = getattr(generator, "builtin_namespace", None)
    if isinstance(namespace, dict):
        for name, guarded in (("getattr", _guarded_getattr), ("hasattr", _guarded_hasattr)):
            if namespace.get(name) in (getattr(builtins, name), None) and name in namespace:
                _installed.append((namespace, name, namespace[name]))
                namespace[name] = guarded
        _BUILTINS_OFFERED.update(namespace)
    original = generator.visit

    def visit(self: Any, node: Any) -> Any:
        if _library(self):
            return original(self, node)
        if isinstance(node, ast.AST):
            check_node(node)
        result = original(self, node)
        if isinstance(node, ast.expr):
            check_value(result, f"`{_source(node)}`")
        return result

    _installed.append((generator, "visit", original))
    generator.visit = visit


def _library(generator: Any) -> bool:
    """Whether the function being compiled is Triton's own (`tl.argmax` reads `core._reduce_with_indices`);
    each @jit function called is compiled by a generator of its own, so a candidate's body is always checked."""
    fn = getattr(getattr(generator, "jit_fn", None), "fn", None)
    return (getattr(fn, "__module__", None) or "").startswith(LANGUAGE + ".")


def uninstall() -> None:
    """Undo `install` (tests only: a replay's process keeps it until it exits)."""
    while _installed:
        owner, name, original = _installed.pop()
        if isinstance(owner, dict):
            owner[name] = original
        else:
            setattr(owner, name, original)
    _BUILTINS_OFFERED.clear()


def cause(exc: BaseException) -> CompileGuardError | None:
    """The guard's refusal behind a compile error (Triton wraps it, with the kernel's source, in its own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, CompileGuardError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def installed() -> bool:
    return bool(_installed)


def _source(node: ast.AST) -> str:
    try:
        return ast.unparse(node)[:80]
    except Exception:  # noqa: BLE001 - a node Triton made itself
        return type(node).__name__
