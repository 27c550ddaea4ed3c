"""Concrete small_shapes for a task too large for the CPU interpreter, worked out from its source alone.

The server never runs task code in its own process, so the suggestion reads the source's top-level
integer constants and the tensor factories in `get_inputs` (`torch.randn(batch, dim)`...), matched
against the full-size input shapes the probe reported, and halves the largest constants first.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

from adaexplore_mcp.tasks.format import _int_constants
from adaexplore_mcp import pyparse

LARGE_INPUT_ELEMENTS = 1_000_000  # above this, a full-size run under the CPU interpreter is slow
SMALL_INPUT_ELEMENTS = 1 << 16  # what suggested small_shapes aim for (about 65k input elements)
# Measured 2026-12-07 on a 2-core machine (bench/results/2026-12-07-first-contact): an elementwise kernel in
# 128-wide blocks took 136 s for one evaluation at 1,048,576 input elements (5 trials of ~26 s), 1.4 s at 16k.
# A lower bound for real kernels (loops over channels or K take many times longer).
INTERPRETER_ELEMENTS_PER_S = 40_000
CALLS_PER_EVALUATION = 5

_SHAPE_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "randperm", "arange"}
_MAX_HALVINGS = 4096
# How the judge reports a probe that a smaller problem would avoid (a timeout, a killed process, no memory).
_TOO_BIG_SIGNS = ("did not finish within the time limit", "crashed the worker", "was killed by", "out of memory",
                  "memoryerror", "can't allocate memory", "cannot allocate memory")  # the last two: torch's CPU allocator


class _Unknown(Exception):
    """An expression the static shape estimate cannot follow."""


@dataclass(frozen=True)
class ShapeSuggestion:
    """Overrides that shrink the inputs, with the estimated total input elements before and after."""

    small_shapes: dict[str, int]
    full_elements: int
    small_elements: int
    fixed: tuple[str, ...] = ()  # large constants left alone (they do not change the input sizes)
    exact: bool = True  # False when the estimate is a rough one (the inputs' shapes could not be followed)

    @property
    def reached(self) -> bool:
        return self.small_elements <= SMALL_INPUT_ELEMENTS


def total_elements(shapes: list[list[int]] | list[tuple[int, ...]]) -> int:
    total = 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def suggest_small_shapes(
    source: str, input_shapes: list[list[int]] | None = None, target: int = SMALL_INPUT_ELEMENTS
) -> ShapeSuggestion | None:
    """small_shapes that bring the inputs down to about `target` elements, or None when no top-level
    integer constant changes the input sizes (or the source does not parse).

    `input_shapes`: the full-size input shapes a probe reported, when known. The inputs' sizes as a
    function of the constants come from reading `get_inputs()` (torch.randn(batch_size, dim)...);
    when that cannot be followed, each input dimension is matched to the constant of the same value.
    Constants are halved, the largest first, until the estimate is <= target (each stays >= 1).
    """
    try:
        return _suggest(pyparse.parse(source), target, input_shapes)
    except (SyntaxError, RecursionError, ValueError):  # unparsable, or absurdly nested or large
        return None


def _suggest(tree: ast.Module, target: int, input_shapes: list[list[int]] | None) -> ShapeSuggestion | None:
    knobs = _int_constants(tree)
    if not knobs:
        return None
    env = _module_env(tree)
    base = {k: env[k] if type(env.get(k)) is int else v for k, v in knobs.items()}
    estimate, exact = _estimator(tree, env, knobs, base, input_shapes)
    if estimate is None:
        return None
    full = estimate({})
    if full is None:
        return None
    affecting = []
    for name, value in base.items():
        if value > 1:
            halved = estimate({name: value // 2})
            if halved is not None and halved < full:
                affecting.append(name)
    if not affecting:
        return None
    values = dict(base)
    current = full
    for _ in range(_MAX_HALVINGS):
        if current <= target:
            break
        movable = [n for n in affecting if values[n] > 1]
        if not movable:
            break
        name = max(movable, key=lambda n: values[n])  # the largest first; ties in source order
        values[name] = max(1, values[name] // 2)
        estimated = estimate({n: v for n, v in values.items() if v != base[n]})
        if estimated is None:
            break
        current = estimated
    changed = {n: values[n] for n in knobs if values[n] != base[n]}
    fixed = tuple(n for n in knobs if n not in affecting and base[n] >= 256)
    return ShapeSuggestion(small_shapes=changed, full_elements=full, small_elements=current, fixed=fixed,
                           exact=exact)


def small_shapes_advice(suggestion: ShapeSuggestion | None) -> str:
    """One sentence to append to a message: which small_shapes to pass, ready to paste."""
    if suggestion is not None and not suggestion.small_shapes:
        return (f"the inputs look small already (about {_count(suggestion.full_elements)} elements), so the "
                "time goes elsewhere: give small_shapes smaller values for the constants behind the model's own "
                "size (e.g. hidden or out_features)")
    if suggestion is None:
        return ("the input sizes do not come from top-level integer constants that small_shapes could "
                "override; make them module-level constants read by get_inputs() (e.g. `batch_size = 16`) "
                "and pass smaller values in small_shapes")
    about = "about" if suggestion.exact else "roughly"
    small, full = _count(suggestion.small_elements), _count(suggestion.full_elements)
    text = (f"pass small_shapes={json.dumps(suggestion.small_shapes)} ({about} {small} input elements instead of "
            f"{full}; any positive integers work, not only powers of two, as long as the model accepts them, e.g. "
            "still divisible by a group count); the CPU interpreter then runs at those sizes and a GPU still at "
            "the full ones")
    if suggestion.fixed:
        text += (f"; {', '.join(suggestion.fixed)} do not change the input sizes and are left as they are "
                 "(smaller values there make the CPU run faster too, if the model allows them)")
    if not suggestion.reached:
        text += "; other input dimensions are fixed in the source, so this is as small as these constants go"
    return text


def large_input_warning(source: str, input_shapes: list[list[int]]) -> str | None:
    """For a task judged under the CPU interpreter without small_shapes: a warning when its full-size
    inputs (as probed) exceed LARGE_INPUT_ELEMENTS, with small_shapes to paste; None otherwise."""
    full = total_elements(input_shapes)
    if full <= LARGE_INPUT_ELEMENTS:
        return None
    advice = small_shapes_advice(suggest_small_shapes(source, input_shapes))
    return (f"large inputs for the CPU interpreter: {_count(full)} input elements at full size and no small_shapes; "
            f"a full-size evaluation under the CPU interpreter may take minutes ({interpreter_duration(full)} or more "
            f"for an elementwise kernel) and time out. To avoid it, {advice} "
            "(calling create_task again with the same name and those small_shapes registers a separate task)")


def probe_failure_advice(source: str, error: str) -> str | None:
    """For a reference probed under the CPU interpreter without small_shapes that timed out, was
    killed or ran out of memory: small_shapes to try, from the source's constants alone; None for
    other failures (a bug in the reference is not fixed by smaller sizes)."""
    if not any(sign in error.lower() for sign in _TOO_BIG_SIGNS):
        return None
    return "if the full size is too much for the CPU interpreter, " + small_shapes_advice(suggest_small_shapes(source))


def interpreter_duration(elements: int) -> str:
    """How long one evaluation at this many input elements takes under the CPU interpreter, at least."""
    seconds = elements * CALLS_PER_EVALUATION / INTERPRETER_ELEMENTS_PER_S
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 5400:
        return f"about {round(seconds / 60)} minutes"
    return f"about {round(seconds / 3600)} hours" if seconds < 172800 else f"about {round(seconds / 86400)} days"


def _count(n: int) -> str:
    """1,234,567; astronomically large estimates (absurd constants) as a power of two."""
    return f"{n:,}" if n < 10**18 else f"2^{n.bit_length() - 1}"


def _estimator(
    tree: ast.Module, env: dict[str, object], knobs: dict[str, int], base: dict[str, int],
    input_shapes: list[list[int]] | None,
):
    """(estimate(overrides) -> total input elements or None, exact?) or (None, False)."""
    fn = next((n for n in reversed(tree.body) if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)

    def static(overrides: dict[str, int]) -> int | None:
        if fn is None:
            return None
        shapes = _static_input_shapes(fn, {**env, **overrides})
        return None if shapes is None else total_elements(shapes)

    static_shapes = _static_input_shapes(fn, dict(env)) if fn is not None else None
    if input_shapes is None:
        if static_shapes is not None:
            return static, True
        referenced = _referenced_names(fn, knobs) if fn is not None else []
        if not referenced:
            return None, False

        def rough(overrides: dict[str, int]) -> int:
            n = 1
            for name in referenced:
                n *= overrides.get(name, base[name])
            return n

        return rough, False
    if static_shapes is not None and sorted(map(tuple, static_shapes)) == sorted(map(tuple, input_shapes)):
        return static, True
    return _matching_estimator(input_shapes, base, _referenced_names(fn, knobs) if fn is not None else []), True


def _matching_estimator(input_shapes: list[list[int]], base: dict[str, int], referenced: list[str]):
    """Each input dimension belongs to a constant of the same value (those get_inputs names first, a
    constant not already used by the same tensor first); other dimensions are fixed."""
    order = referenced + [n for n in base if n not in referenced]
    owners: list[list[str | None]] = []
    for shape in input_shapes:
        used: set[str] = set()
        row: list[str | None] = []
        for d in shape:
            candidates = [n for n in order if base[n] == d and d > 1]
            fresh = [n for n in candidates if n not in used]
            owner = (fresh or candidates or [None])[0]
            if owner:
                used.add(owner)
            row.append(owner)
        owners.append(row)

    def estimate(overrides: dict[str, int]) -> int:
        return total_elements([[overrides.get(o, d) if o else d for o, d in zip(row, shape)]
                               for row, shape in zip(owners, input_shapes)])

    return estimate


def _referenced_names(fn: ast.FunctionDef, knobs: dict[str, int]) -> list[str]:
    seen: dict[str, None] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in knobs:
            seen[node.id] = None
    return list(seen)


def _module_env(tree: ast.Module) -> dict[str, object]:
    """Top-level names bound to ints or tuples of ints, as evaluated once at import."""
    env: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        _assign(targets, value, env)
    return env


def _assign(targets: list[ast.expr], value: ast.expr, env: dict[str, object]) -> None:
    try:
        result: object = _eval(value, env)
    except _Unknown:
        result = None
    for target in targets:
        _bind(target, result, env)


def _bind(target: ast.expr, value: object, env: dict[str, object]) -> None:
    if isinstance(target, ast.Name):
        if value is None:
            env.pop(target.id, None)
        else:
            env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        parts = value if isinstance(value, tuple) and len(value) == len(target.elts) else None
        for i, t in enumerate(target.elts):
            _bind(t.value if isinstance(t, ast.Starred) else t, None if parts is None else parts[i], env)


def _eval(node: ast.expr, env: dict[str, object]) -> object:
    """An int or a tuple of ints from constants, names, + - * // % **, tuples, *splats, int/min/max."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        items: list[object] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                inner = _eval(e.value, env)
                if not isinstance(inner, tuple):
                    raise _Unknown("splat")
                items.extend(inner)
            else:
                items.append(_eval(e, env))
        return tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand, env)
        if type(v) is not int:
            raise _Unknown("unary")
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(a, tuple) and isinstance(b, tuple) and isinstance(node.op, ast.Add):
            return a + b
        if type(a) is not int or type(b) is not int:
            raise _Unknown("binop")
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
        if isinstance(node.op, ast.Mod) and b:
            return a % b
        if isinstance(node.op, ast.Pow) and 0 <= b <= 64 and abs(a) <= 1 << 20:
            return a**b
        raise _Unknown("binop")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_eval(a, env) for a in node.args]
        if all(type(a) is int for a in args) and args:
            if node.func.id == "int" and len(args) == 1:
                return args[0]
            if node.func.id in ("min", "max") and len(args) >= 2:
                return min(args) if node.func.id == "min" else max(args)
    raise _Unknown(type(node).__name__)


def _factory_name(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name if name in _SHAPE_FACTORIES else None


def _factory_shape(call: ast.Call, name: str, env: dict[str, object]) -> tuple[int, ...]:
    size_kw = next((k.value for k in call.keywords if k.arg == "size"), None)
    args = [a for a in call.args]
    if name == "randint":
        node = size_kw if size_kw is not None else (args[-1] if len(args) >= 2 else None)
        if node is None:
            raise _Unknown("randint")
        shape = _eval(node, env)
    elif name == "full":
        node = size_kw if size_kw is not None else (args[0] if args else None)
        if node is None:
            raise _Unknown("full")
        shape = _eval(node, env)
    elif name in ("randperm", "arange"):
        if len(args) != 1 or call.keywords and any(k.arg in ("start", "end", "step") for k in call.keywords):
            raise _Unknown(name)
        shape = (_eval(args[0], env),)
    elif size_kw is not None and not args:
        shape = _eval(size_kw, env)
    elif len(args) == 1 and not isinstance(args[0], ast.Starred):
        one = _eval(args[0], env)
        shape = one if isinstance(one, tuple) else (one,)
    else:
        shape = _eval(ast.Tuple(elts=args, ctx=ast.Load()), env)
    if not isinstance(shape, tuple):
        shape = (shape,)
    if not all(type(d) is int and d >= 0 for d in shape):
        raise _Unknown("shape")
    return shape


def _static_input_shapes(fn: ast.FunctionDef, env: dict[str, object]) -> list[tuple[int, ...]] | None:
    """The shapes of the tensors get_inputs() makes with torch factories, read from its body in order;
    None when it does anything this cannot follow (loops, comprehensions, shapes from other tensors)."""
    local = dict(env)
    shapes: list[tuple[int, ...]] = []
    loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    try:
        for stmt in fn.body:
            calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and _factory_name(n)]
            if calls and any(isinstance(n, loops) for n in ast.walk(stmt)):
                return None
            if any(isinstance(n, (ast.FunctionDef, ast.Lambda)) for n in ast.walk(stmt)):
                return None
            for call in calls:
                shapes.append(_factory_shape(call, _factory_name(call) or "", local))
            if isinstance(stmt, ast.Assign):
                _assign(stmt.targets, stmt.value, local)
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
                local.pop(stmt.target.id, None)
    except _Unknown:
        return None
    return shapes
