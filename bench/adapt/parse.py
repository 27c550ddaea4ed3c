"""Parsing a synthesized task's reference for the first-draft writer (bench/adapt/codegen.py).

The op names alone lack the scale values, clamp bounds, parameter names..., so the forward is read back
from the emitted source, statement by statement (tasks/synthesis_emit.py writes exactly these forms).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Op:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedTask:
    init_source: str            # the reference's __init__, verbatim
    forward_args: list[str]     # ['x'] or ['x', 'w']
    head: str                   # 'linear', 'matmul', 'module' (conv / pool glue), 'none'
    head_attr: str | None
    ops: list[Op]
    rank: int
    half: bool
    uses_residual: bool


_FLOAT = r"(-?[\d.]+(?:e-?\d+)?)"


def _model_class(tree: ast.Module) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return node
    raise ValueError("the task source defines no class Model")


def parse_task(source: str) -> ParsedTask:
    tree = ast.parse(source)
    cls = _model_class(tree)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    init_src = ast.get_source_segment(source, init) or ast.unparse(init)
    attr_kind: dict[str, str] = {}
    for stmt in ast.walk(init):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute):
            attr_kind[stmt.targets[0].attr] = ast.unparse(stmt.value)
    fargs = [a.arg for a in fwd.args.args[1:]]
    head, head_attr, ops = "none", None, []
    half = "float16" in source or "bfloat16" in source
    rank = 4 if re.search(r"torch\.randn\(batch_size, \w+, height, width", source) else 2
    uses_residual = False
    for stmt in fwd.body:
        text = ast.unparse(stmt)
        m = re.fullmatch(r"x = self\.(\w+)\(x\)", text)
        if m:
            kind = attr_kind.get(m.group(1), "")
            if "nn.Linear" in kind:
                head, head_attr = "linear", m.group(1)
            elif "nn.LayerNorm" in kind:
                ops.append(Op("layernorm", {"attr": m.group(1)}))
            elif "nn.GroupNorm" in kind:
                ops.append(Op("groupnorm", {"attr": m.group(1)}))
            else:
                head, head_attr = "module", m.group(1)
            continue
        if text == "x = torch.matmul(x, w)":
            head = "matmul"
        elif text == "h = x":
            uses_residual = True
        elif text == "return x":
            pass
        elif m := re.fullmatch(r"x = x \* self\.(\w+) \+ self\.(\w+)", text):
            ops.append(Op("affine", {"scale": m.group(1), "shift": m.group(2)}))
        elif text == "x = x * x":
            ops.append(Op("square"))
        elif text == "x = torch.abs(x)":
            ops.append(Op("abs"))
        elif text in ("x = torch.relu(x)",):
            ops.append(Op("relu"))
        elif text == "x = F.gelu(x)":
            ops.append(Op("gelu"))
        elif text == "x = F.silu(x)":
            ops.append(Op("silu"))
        elif text == "x = torch.tanh(x)":
            ops.append(Op("tanh"))
        elif text == "x = torch.sigmoid(x)":
            ops.append(Op("sigmoid"))
        elif m := re.fullmatch(r"x = F\.leaky_relu\(x, negative_slope=" + _FLOAT + r"\)", text):
            ops.append(Op("leaky_relu", {"slope": float(m.group(1))}))
        elif text == "x = F.hardswish(x)":
            ops.append(Op("hardswish"))
        elif m := re.fullmatch(r"x = x \* " + _FLOAT, text):
            ops.append(Op("scale", {"value": float(m.group(1))}))
        elif m := re.fullmatch(r"x = torch\.clamp\(x, min=" + _FLOAT + r", max=" + _FLOAT + r"\)", text):
            ops.append(Op("clamp", {"lo": float(m.group(1)), "hi": float(m.group(2))}))
        elif m := re.fullmatch(r"x = x \+ self\.(\w+)", text):
            ops.append(Op("bias", {"attr": m.group(1)}))
        elif text == "x = x + h":
            ops.append(Op("residual"))
        elif m := re.fullmatch(r"x = torch\.(sum|mean|amax)\(x, dim=1, keepdim=True\)", text):
            ops.append(Op(m.group(1)))
        elif text == "x = torch.max(x, dim=1, keepdim=True)[0]":
            ops.append(Op("max"))
        elif m := re.fullmatch(r"x = torch\.(mean|amax)\(x, dim=\(2, 3\), keepdim=True\)", text):
            ops.append(Op("spatial_" + m.group(1)))
        elif m := re.fullmatch(r"x = torch\.softmax\(x \* " + _FLOAT + r", dim=1\)", text):
            ops.append(Op("softmax", {"temperature": float(m.group(1))}))
        elif text == "x = torch.log_softmax(x, dim=1)":
            ops.append(Op("log_softmax"))
        elif m := re.fullmatch(r"x = x \* torch\.rsqrt\(torch\.mean\(x \* x, dim=-1, keepdim=True\) \+ " + _FLOAT
                               + r"\) \* self\.(\w+)", text):
            ops.append(Op("rmsnorm", {"eps": float(m.group(1)), "attr": m.group(2)}))
        else:
            raise ValueError(f"cannot translate forward statement: {text}")
    return ParsedTask(init_src, fargs, head, head_attr, ops, rank, half, uses_residual)
