"""The KernelBench task format: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`.

KernelBench problem files must load unchanged, so a task is just its reference source. A task may
also carry `small_shapes`: overrides for the module's top-level integer constants (or tuples of positive
integers, such as `bias_shape`), used under the CPU interpreter. The overrides are written into the source
(`source_with_constants`) before it runs, so constants derived from them (`bias_shape = (out_channels, 1, 1)`)
follow.

Two levels live here:
- `check_static(source)` / `check_small_shapes(...)` parse without executing anything (safe in the
  server process);
- `import_file(...)` executes the source; in the server it is only ever called by the judge's
  sandboxed runner process (judge/runner.py), the one place task and candidate code runs.
Suggesting small_shapes, statically, lives in shape_advice.py.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import operator
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from adaexplore_mcp.errors import UserError, quote
from adaexplore_mcp import pyparse

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class TaskFormatError(UserError):
    """The reference source is not a usable KernelBench task; the message says how to fix it."""


@dataclass(frozen=True)
class TaskSpec:
    """Everything a worker needs to run a task's reference."""

    task_id: str
    name: str
    source: str
    small_shapes: dict[str, int | tuple[int, ...]] = field(default_factory=dict)
    degenerate: bool = False
    deterministic: bool = True
    degenerate_outputs: tuple[int, ...] | None = None  # None: every output, when degenerate

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def integer_constants(source: str) -> dict[str, int]:
    """Top-level integer constants: the knobs `small_shapes` may override.

    Counted: `n = 16`, `n: int = 16`, chained `height = width = 256` (both names) and tuple unpacking
    `a, b = 1, 2` / `(a, b) = (1, 2)` (each name bound to an integer), and integers made of literals alone
    (`K = 131072 * 4`). Floats, strings, bools and values computed from other names (`dim2 = dim * 2`,
    evaluated once at import) are not knobs.
    """
    return _int_constants(pyparse.parse(source))


def _int_constants(tree: ast.Module) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind_int_constants(target, node.value, out)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            _bind_int_constants(node.target, node.value, out)
    return out


_LITERAL_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
                ast.LShift: operator.lshift, ast.Pow: operator.pow}
_LITERAL_LIMIT = 1 << 62


def literal_int(value: ast.expr, depth: int = 0) -> int | None:
    """The value of an integer made of literals alone (`131072 * 4`, `2 ** 20`, `1 << 16`), or None: such a
    constant depends on no other name, so overriding it is as safe as overriding `n = 16`. Bounded, so an
    absurd literal (`10 ** 10 ** 10`) is refused rather than computed."""
    if depth > 16:
        return None
    if isinstance(value, ast.Constant):
        return value.value if type(value.value) is int and abs(value.value) <= _LITERAL_LIMIT else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        inner = literal_int(value.operand, depth + 1)
        return None if inner is None else (-inner if isinstance(value.op, ast.USub) else inner)
    if isinstance(value, ast.BinOp) and type(value.op) in _LITERAL_OPS:
        left, right = literal_int(value.left, depth + 1), literal_int(value.right, depth + 1)
        if left is None or right is None or (isinstance(value.op, (ast.Pow, ast.LShift)) and not 0 <= right <= 62):
            return None
        if isinstance(value.op, ast.FloorDiv) and right == 0:
            return None
        result = _LITERAL_OPS[type(value.op)](left, right)
        return result if abs(result) <= _LITERAL_LIMIT else None
    return None


def _bind_int_constants(target: ast.expr, value: ast.expr, out: dict[str, int]) -> None:
    if isinstance(target, ast.Name):
        number = literal_int(value)
        if number is not None:
            out[target.id] = number
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts])
    ):
        for t, v in zip(target.elts, value.elts):
            _bind_int_constants(t, v, out)


MAX_NAME_CHARS = 120


def check_task_name(name: object) -> None:
    """A task's name is one line of printable text: it is shown in every list, brief and report, and written
    into exported files' headers (a newline in it wrote code outside the header's comment)."""
    if not isinstance(name, str) or not name.strip():
        raise TaskFormatError("name must be a non-empty string, e.g. 'fused_gelu'")
    if len(name) > MAX_NAME_CHARS:
        raise TaskFormatError(f"name is {len(name)} characters; the limit is {MAX_NAME_CHARS} (put details in "
                              "`description`)")
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        raise TaskFormatError(f"name must be one line of printable characters; it contains {bad!r} (U+{ord(bad):04X})")


MAX_DESCRIPTION_CHARS = 2000


def check_task_description(description: object) -> None:
    """A description is shown to every session in lists and briefs: a bounded text (a 1 MB one made every
    `list_tasks` 1 MB for every client of the data dir)."""
    if not isinstance(description, str):
        raise TaskFormatError("description must be a string")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise TaskFormatError(f"description is {len(description)} characters; the limit is {MAX_DESCRIPTION_CHARS}")


def check_static(source: str, max_bytes: int, required: tuple[str, ...] = REQUIRED_NAMES) -> ast.Module:
    """Parse and check the required names without running anything; raise TaskFormatError."""
    if not source or not source.strip():
        raise TaskFormatError("the reference source is empty")
    size = len(source.encode())
    if size > max_bytes:
        raise TaskFormatError(f"the source is {size} bytes; the limit is {max_bytes} bytes")
    try:
        tree = pyparse.parse(source)
    except SyntaxError as exc:
        raise TaskFormatError(f"the source does not parse: line {exc.lineno}: {exc.msg}") from None
    missing = [n for n in required if n not in top_level_names(tree)]
    if missing:
        raise TaskFormatError(
            f"the source does not define {', '.join(missing)} at top level; a KernelBench task needs "
            "`class Model(nn.Module)`, `def get_inputs()` and `def get_init_inputs()`"
        )
    return tree


ShapeValue = int | tuple[int, ...]


def tuple_constants(source: str) -> set[str]:
    """Top-level names bound to a tuple or list display (`bias_shape = (out_channels, 1, 1)`): a tuple of
    positive integers may replace them, so a shape that is not derived from the integer knobs can shrink too."""
    names: set[str] = set()
    for node in pyparse.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if isinstance(value, (ast.Tuple, ast.List)):
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _shape_value(value: object) -> ShapeValue | None:
    """A positive integer, or a non-empty tuple of positive integers (JSON gives a list), or None."""
    if type(value) is int:
        return value if value > 0 else None
    if isinstance(value, (list, tuple)) and value and all(type(v) is int and v > 0 for v in value):
        return tuple(value)
    return None


def check_small_shapes(source: str, small_shapes: dict[str, object] | None) -> dict[str, ShapeValue]:
    """Small-shape overrides must name existing top-level integer constants with positive values, or
    top-level tuple constants with tuples of positive integers."""
    if not small_shapes:
        return {}
    knobs = integer_constants(source)
    tuples = tuple_constants(source) - set(knobs)
    unknown = sorted(set(small_shapes) - set(knobs) - tuples)
    if unknown:  # named briefly: a tool error quotes a few hundred characters of its input at most
        raise TaskFormatError(
            f"small_shapes names {_few(unknown)}, which are not top-level integer constants of the source "
            f"(available: {_few(sorted(knobs))}; tuple constants: {_few(sorted(tuples))})"
        )
    bad = [k for k, v in small_shapes.items() if _shape_value(v) is None or (k in knobs) != (type(v) is int)]
    if bad:
        raise TaskFormatError(f"small_shapes values must be positive integers (tuples of them for tuple "
                              f"constants); not so for {_few(bad)}")
    return {k: _shape_value(v) for k, v in small_shapes.items()}  # type: ignore[misc]


def source_with_constants(source: str, overrides: dict[str, ShapeValue]) -> str:
    """The source with each named top-level constant rebound right after its own assignment, on the same
    line (`n = 4096; n = 64`): every later statement, constants derived from it included
    (`bias_shape = (out_channels, 1, 1)`), sees the new value when the module runs, and line numbers (error
    excerpts, Triton's source lookup) do not move. A name assigned several times is rebound after each."""
    if not overrides:
        return source
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, int, str]] = []
    for node in pyparse.parse(source).body:
        if isinstance(node, ast.Assign):
            bound = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            bound = {node.target.id}
        else:
            continue
        text = "".join(f"; {name} = {_literal(overrides[name])}" for name in sorted(bound & set(overrides)))
        if text and node.end_lineno is not None and node.end_col_offset is not None:
            inserts.append((node.end_lineno - 1, node.end_col_offset, text))
    for row, col, text in sorted(inserts, reverse=True):
        line = lines[row]
        prefix = line.encode()[:col].decode()  # ast offsets count UTF-8 bytes
        lines[row] = prefix + text + line[len(prefix):]
    return "".join(lines)


def _literal(value: ShapeValue) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + "".join(f"{int(v)}, " for v in value) + ")"
    return str(int(value))


def _few(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(quote(n, 40) for n in names[:limit])
    return f"[{shown}{f', and {len(names) - limit} more' if len(names) > limit else ''}]"


def write_module_file(directory: Path, prefix: str, source: str) -> tuple[str, Path]:
    """Write source to a content-addressed file (Triton reads kernel source back via inspect)."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{prefix}_{source_hash(source)}"
    path = directory / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        # A unique temporary name per writer: threads and server processes may write the same file at once,
        # and the atomic rename means a reader never sees a half-written module.
        tmp = path.with_name(f".{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    return name, path


def import_file(module_name: str, path: Path) -> ModuleType:
    """Import a file as a fresh module (replacing any earlier one of the same name)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def apply_shapes(module: ModuleType, overrides: dict[str, ShapeValue]) -> None:
    """Override top-level constants of a module already run; get_inputs()/get_init_inputs() read them at
    call time. Constants derived from them at import keep their values: where the source is at hand, run
    `source_with_constants` instead (the judge's runner does both, so the two agree).

    Every name given is set, including each name of a chained (`height = width = 256`) or tuple
    (`a, b = 1, 2`) assignment; names not given keep their value (they are separate variables).
    """
    for name, value in overrides.items():
        setattr(module, name, tuple(value) if isinstance(value, list) else value)
