"""Scalars read back with `.item()` that flow into a launch's arguments: data of the call, recomputed by the
replay from its own inputs.

The most common way generated kernels chain a reduction into an elementwise pass is `s = x.sum().item()`,
then a launch with `s / n` among its arguments. The replay runs the recorded program on new inputs, where
`.item()` returns another number; a launch argument recorded as a number would keep the trial's, and the call
was refused as not replayable. While a call is recorded (replay/record.py), `Tensor.item()` returns a float that
carries how it was made (`HostScalar`: the host read it came from, and the arithmetic done on it in Python:
+, -, *, /, **, negation, abs); a launch argument that is one is recorded as that expression, and the replay
evaluates it with the values its own run read back (`evaluate`). What leaves the arithmetic above (`math.sqrt`,
`float()`, a comparison deciding a branch, an operator's scalar argument) is a plain number again, recorded as
such: a call that depends on it is still refused, with the message that says so.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from .wire import encode_float

MAX_DEPTH = 64  # an expression deeper than this is recorded as a plain number
_BINARY: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow}
_UNARY: dict[str, Callable[[float], float]] = {"neg": operator.neg, "abs": abs}


class HostScalar(float):
    """A float read back from a tensor during a recorded call, with `expr`: how it was computed from the call's
    host reads (['h', k] is the k-th read; ['c', number] a constant; [op, ...] arithmetic)."""

    expr: list

    def __new__(cls, value: float, expr: list) -> "HostScalar":
        obj = super().__new__(cls, value)
        obj.expr = expr
        return obj


def _operand(v: Any) -> list | None:
    if isinstance(v, HostScalar):
        return v.expr
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ["c", encode_float(float(v))]
    return None


def _depth(expr: list) -> int:
    return 1 + max((_depth(e) for e in expr[1:] if isinstance(e, list) and e and e[0] != "c"), default=0)


def _binary(symbol: str, swapped: bool) -> Callable[[HostScalar, Any], Any]:
    fn = _BINARY[symbol]

    def method(self: HostScalar, other: Any) -> Any:
        theirs = _operand(other)
        if theirs is None:
            return NotImplemented
        left, right = (other, float(self)) if swapped else (float(self), other)
        value = fn(left, right)
        if not isinstance(value, float):
            return value
        expr = [symbol, theirs, self.expr] if swapped else [symbol, self.expr, theirs]
        return HostScalar(value, expr) if _depth(expr) <= MAX_DEPTH else value

    return method


for _symbol, _name in (("+", "add"), ("-", "sub"), ("*", "mul"), ("/", "truediv"), ("**", "pow")):
    setattr(HostScalar, f"__{_name}__", _binary(_symbol, False))
    setattr(HostScalar, f"__r{_name}__", _binary(_symbol, True))
HostScalar.__neg__ = lambda self: HostScalar(-float(self), ["neg", self.expr])  # type: ignore[method-assign]
HostScalar.__abs__ = lambda self: HostScalar(abs(float(self)), ["abs", self.expr])  # type: ignore[method-assign]


def plain(value: Any) -> Any:
    """What Triton is given: a HostScalar as the float it is."""
    return float(value) if isinstance(value, HostScalar) else value


def host_reads(described: Any) -> set[int]:
    """The host reads (['h', k]) that a launch's described arguments are computed from."""
    found: set[int] = set()
    todo, seen = [described], 0
    while todo and seen < 100000:
        v, seen = todo.pop(), seen + 1
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            if len(v) == 2 and v[0] == "h" and type(v[1]) is int:
                found.add(v[1])
            else:
                todo.extend(v)
    return found


def evaluate(expr: Any, reads: dict[int, Any], decode: Callable[[Any], Any], depth: int = 0) -> float:
    """The value of a recorded expression with this run's host reads; ValueError on anything malformed."""
    if not isinstance(expr, list) or not expr or depth > MAX_DEPTH:
        raise ValueError("a malformed host expression")
    head = expr[0]
    if head == "h" and len(expr) == 2 and type(expr[1]) is int and expr[1] in reads:
        return float(reads[expr[1]])
    if head == "c" and len(expr) == 2:
        return float(decode(expr[1]))
    if head in _UNARY and len(expr) == 2:
        return _UNARY[head](evaluate(expr[1], reads, decode, depth + 1))
    if head in _BINARY and len(expr) == 3:
        left, right = (evaluate(e, reads, decode, depth + 1) for e in expr[1:])
        try:
            return float(_BINARY[head](left, right))
        except (ZeroDivisionError, OverflowError):
            return math.nan
    raise ValueError(f"a malformed host expression ({str(head)[:20]})")
