"""A first-draft Triton kernel writer for synthesized tasks, writing the way an LLM assistant writes a
first draft: mostly canonical idioms, sometimes an idiom that the Triton compiler (or interpreter)
rejects, and now and then a logic slip (a forgotten mask, a wrong grid, dividing by BLOCK).

No idiom is marked valid or invalid here: the real Triton decides when the judge runs the draft, and
the Adapt loop clusters whatever fails. Probabilities are the writer's habits, not ground truth.

    drafts = draft_kernels(task, random.Random(0), count=4)   # task: SynthesizedTask or (ops, source)

The task's forward is parsed from its source (the op names alone lack the scale values, clamp bounds,
parameter names...). ModelNew copies the reference's __init__ verbatim (same signature, same
parameter names, so the judge can copy the weights); the head (Linear / matmul / conv / pooling) runs in
PyTorch as glue or, for Linear / matmul, as a Triton tl.dot kernel; the tail is fused into Triton
kernels, one per layout segment:

- flat:  elementwise-only chains (one program per BLOCK of elements),
- row:   ops over dim 1 (bias, reductions with keepdim, softmax, layernorm / rmsnorm): one program
         per row (b, h, w) holding all of dim 1 in one block,
- plane: a reduction over (H, W): one program per (b, c) looping over H*W,
- group: groupnorm: one program per (b, group), two passes over its contiguous C/G*H*W elements.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass, field
from typing import Any

NEG_INF = "float('-inf')"
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n"


# ------------------------------------------------------------------------------------------------
# parsing the reference


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


# ------------------------------------------------------------------------------------------------
# habits


def pick(rng: random.Random, options: list[tuple[float, Any]]) -> Any:
    total = sum(w for w, _ in options)
    r = rng.random() * total
    for w, v in options:
        r -= w
        if r < 0:
            return v
    return options[-1][1]


@dataclass
class Style:
    """Per-draft habits (one assistant writes one draft consistently)."""

    pid: str
    cast: str            # template with {v}
    cast_always: bool
    block: str           # row layout: 'pow2' | 'constexpr_f' | 'runtime_f' | 'fixed'
    loop: str            # 'range' | 'static_range'
    acc: str             # 'zeros' | 'zeros_tuple' | 'zeros_nodtype' | 'full' | 'scalar'
    num_warps: int | None
    careless: float      # chance of a logic slip (forgotten where-mask and friends)
    grid_slip: bool
    mask_slip: bool
    and_masks: bool
    flat_block: int


def sample_style(rng: random.Random, half: bool) -> Style:
    return Style(
        pid=pick(rng, [(6, "tl.program_id(0)"), (4, "tl.program_id(axis=0)")]),
        cast=pick(rng, [(7, "{v}.to(tl.float32)"), (1.2, "tl.cast({v}, tl.float32)"), (1.0, "tl.float32({v})"),
                        (0.5, "{v}.float()"), (0.3, "{v}.to(torch.float32)"), (0.6 if half else 0.0, "{v}")]),
        cast_always=half or rng.random() < 0.35,
        block=pick(rng, [(7.5, "pow2"), (1.2, "constexpr_f"), (0.6, "runtime_f"), (0.5, "fixed")]),
        loop=pick(rng, [(8.5, "range"), (1.0, "static_range")]),
        acc=pick(rng, [(6, "zeros"), (1.5, "zeros_tuple"), (0.7, "zeros_nodtype"), (1, "full"), (1.2, "scalar")]),
        num_warps=pick(rng, [(4, 4), (3, 8), (1, 16), (1.5, None)]),
        careless=pick(rng, [(6, 0.0), (3, 0.3), (1, 0.7)]),
        grid_slip=rng.random() < 0.03,
        mask_slip=rng.random() < 0.03,
        and_masks=rng.random() < 0.12,
        flat_block=pick(rng, [(5, 1024), (2, 512), (2, 256), (1, 2048)]),
    )


# ------------------------------------------------------------------------------------------------
# kernel building


@dataclass
class Ctx:
    """Where the kernel body stands: x is a vector or a scalar, how to index a per-channel param."""

    vec: bool = True
    ch: str | None = "ch"        # expression of the channel index ('ch' vector, 'c' scalar) or None
    ch_vec: bool = True
    mask: str = "mask"
    idx: str = "idx"


class Kernel:
    def __init__(self, name: str, rng: random.Random, style: Style, half: bool):
        self.name, self.rng, self.style, self.half = name, rng, style, half
        self.params: list[str] = ["x_ptr", "out_ptr"]
        self.launch: list[str] = ["x", "y"]
        self.body: list[str] = []
        self.imports: set[str] = set()
        self.globals: list[str] = []
        self.n = 0

    def tmp(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def ptr(self, name: str, value: str) -> str:
        if name not in self.params:
            self.params.append(name)
            self.launch.append(value)
        return name

    def scalar(self, name: str, value: Any, kind: str) -> str:
        """A float constant: 'literal' inlined, 'runtime' argument, 'constexpr' argument."""
        if kind == "literal":
            return repr(value)
        pname = name.upper() if kind == "constexpr" else name
        if pname not in [p.split(":")[0] for p in self.params]:
            self.params.append(f"{pname}: tl.constexpr" if kind == "constexpr" else pname)
            self.launch.append(f"{pname}={value!r}" if kind == "constexpr" else repr(value))
        return pname

    def emit(self, *lines: str) -> None:
        self.body.extend(lines)

    def cast(self, expr: str) -> str:
        if self.style.cast_always:
            return self.style.cast.format(v=expr)
        return expr

    def load_param(self, pname: str, value: str, ctx: Ctx) -> str:
        p = self.ptr(pname, value)
        if ctx.ch_vec:
            return self.cast(f"tl.load({p} + {ctx.ch}, mask={ctx.mask}, other=0.0)")
        return self.cast(f"tl.load({p} + {ctx.ch})")

    def source(self) -> str:
        params = list(self.params)
        sig = ", ".join(params)
        return "\n".join(["@triton.jit", f"def {self.name}({sig}):"] + ["    " + ln for ln in self.body]) + "\n"


def _ew(op: Op, k: Kernel, ctx: Ctx, model_attr: str = "self") -> None:
    """One elementwise op on x (a block or, after a reduction, a scalar)."""
    rng = k.rng
    n = op.name
    if n == "relu":
        k.emit(pick(rng, [(5, "x = tl.maximum(x, 0.0)"), (3, "x = tl.where(x > 0, x, 0.0)"),
                          (1, "x = tl.where(x > 0, x, tl.zeros_like(x))"), (0.8, "x = max(x, 0.0)"),
                          (0.5, "x = tl.relu(x)")]))
    elif n == "gelu":
        v = pick(rng, [(4, "tl.erf"), (2, "tl.math.erf"), (1, "libdevice.erf"), (1.5, "tanh"), (0.6, "sig"),
                       (0.3, "gelu")])
        if v in ("tl.erf", "tl.math.erf", "libdevice.erf"):
            if v.startswith("libdevice"):
                k.imports.add("from triton.language.extra import libdevice")
            k.emit(f"x = 0.5 * x * (1.0 + {v}(x * 0.7071067811865476))")
        elif v == "tanh":
            t = pick(rng, [(2, "tl.tanh"), (1, "tl.math.tanh"), (1, "libdevice.tanh")])
            if t.startswith("libdevice"):
                k.imports.add("from triton.language.extra import libdevice")
            k.emit(f"x = 0.5 * x * (1.0 + {t}(0.7978845608028654 * (x + 0.044715 * x * x * x)))")
        elif v == "sig":
            k.emit("x = x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))")
        else:
            k.emit("x = tl.gelu(x)")
    elif n == "silu":
        k.emit(pick(rng, [(5, "x = x * tl.sigmoid(x)"), (3, "x = x / (1.0 + tl.exp(-x))"),
                          (1, "x = x * (1.0 / (1.0 + tl.exp(-x)))"), (0.4, "x = tl.silu(x)")]))
    elif n == "tanh":
        v = pick(rng, [(2, "tl.tanh"), (1.5, "tl.math.tanh"), (2, "libdevice"), (1, "extra"), (1.5, "sig"),
                       (1.5, "exp")])
        if v in ("tl.tanh", "tl.math.tanh"):
            k.emit(f"x = {v}(x)")
        elif v == "libdevice":
            k.imports.add("from triton.language.extra import libdevice")
            k.emit("x = libdevice.tanh(x)")
        elif v == "extra":
            k.emit("x = tl.extra.cuda.libdevice.tanh(x)")
        elif v == "sig":
            k.emit("x = 2.0 * tl.sigmoid(2.0 * x) - 1.0")
        else:
            e = k.tmp("e")
            k.emit(f"{e} = tl.exp(2.0 * x)", f"x = ({e} - 1.0) / ({e} + 1.0)")
    elif n == "sigmoid":
        k.emit(pick(rng, [(5, "x = tl.sigmoid(x)"), (3, "x = 1.0 / (1.0 + tl.exp(-x))"),
                          (0.5, "x = tl.math.sigmoid(x)")]))
    elif n == "leaky_relu":
        s = op.args.get("slope", 0.1)
        v = pick(rng, [(5, "where"), (1, "global"), (2, "maximum"), (1, "runtime")])
        if v == "where":
            k.emit(f"x = tl.where(x > 0, x, {s!r} * x)")
        elif v == "global":
            k.globals.append(f"NEG_SLOPE = {s!r}")
            k.emit("x = tl.where(x >= 0, x, x * NEG_SLOPE)")
        elif v == "maximum":
            k.emit(f"x = tl.maximum(x, {s!r} * x)")
        else:
            p = k.scalar("negative_slope", s, "runtime")
            k.emit(f"x = tl.where(x > 0, x, x * {p})")
    elif n == "hardswish":
        k.emit(pick(rng, [(4, "x = x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0"),
                          (2, "x = x * tl.clamp(x + 3.0, 0.0, 6.0) / 6.0"),
                          (0.8, "x = x * min(max(x + 3.0, 0.0), 6.0) / 6.0"),
                          (1, "x = x * tl.clamp(x / 6.0 + 0.5, 0.0, 1.0)")]))
    elif n == "scale":
        p = k.scalar(k.tmp("scale"), op.args["value"], pick(rng, [(5, "literal"), (2, "runtime"), (1, "constexpr")]))
        k.emit(f"x = x * {p}")
    elif n == "clamp":
        lo, hi = op.args["lo"], op.args["hi"]
        kind = pick(rng, [(6, "literal"), (1.5, "runtime"), (0.7, "constexpr")])
        lo_s, hi_s = k.scalar(k.tmp("lo"), lo, kind), k.scalar(k.tmp("hi"), hi, kind)
        k.emit(pick(rng, [(4, f"x = tl.minimum(tl.maximum(x, {lo_s}), {hi_s})"), (3, f"x = tl.clamp(x, {lo_s}, {hi_s})"),
                          (0.5, f"x = x.clamp({lo_s}, {hi_s})"),
                          (1, f"x = tl.where(x < {lo_s}, {lo_s}, tl.where(x > {hi_s}, {hi_s}, x))"),
                          (0.4, f"x = min(max(x, {lo_s}), {hi_s})")]))
    elif n == "abs":
        k.emit(pick(rng, [(5, "x = tl.abs(x)"), (2, "x = tl.where(x < 0, -x, x)"), (1, "x = abs(x)"),
                          (0.5, "x = tl.math.abs(x)")]))
    elif n == "square":
        k.emit(pick(rng, [(6, "x = x * x"), (1, "x = x ** 2")]))
    elif n in ("bias", "affine"):
        if n == "bias":
            b = k.load_param(op.args["attr"] + "_ptr", f"{model_attr}.{op.args['attr']}", ctx)
            k.emit(f"x = x + {b}")
        else:
            s = k.load_param("in_scale_ptr", f"{model_attr}.{op.args['scale']}", ctx)
            t = k.load_param("in_shift_ptr", f"{model_attr}.{op.args['shift']}", ctx)
            k.emit(f"x = x * {s} + {t}")
    elif n == "residual":
        p = k.ptr("h_ptr", "h")
        k.emit("x = x + " + k.cast(f"tl.load({p} + {ctx.idx}, mask={ctx.mask}, other=0.0)"))
    else:  # pragma: no cover
        raise ValueError(n)


def _masked(k: Kernel, expr: str, fill: str) -> str:
    """x with the padded lanes set to `fill`, or (careless) not."""
    if k.rng.random() < k.style.careless:
        return expr
    return f"tl.where(mask, {expr}, {fill})"


def _reduce(k: Kernel, fn: str, expr: str) -> str:
    return pick(k.rng, [(6, f"tl.{fn}({expr}, axis=0)"), (1.5, f"tl.{fn}({expr}, 0)"),
                        (1, f"tl.{fn}({expr}, axis=-1)"), (0.6, f"({expr}).{fn}(axis=0)"),
                        (0.25, f"tl.{fn}({expr}, axis=1)")])


def _rsqrt(k: Kernel, expr: str) -> str:
    v = pick(k.rng, [(5, "tl.rsqrt"), (3, "div"), (1, "tl.math.rsqrt"), (0.6, "libdevice.rsqrt")])
    if v == "div":
        return f"1.0 / tl.sqrt({expr})"
    if v.startswith("libdevice"):
        k.imports.add("from triton.language.extra import libdevice")
    return f"{v}({expr})"


def _row_op(op: Op, k: Kernel, ctx: Ctx, fdim: str) -> None:
    rng, n = k.rng, op.name
    if n in ("sum", "mean"):
        r = _reduce(k, "sum", _masked(k, "x", "0.0"))
        if n == "mean":
            denom = fdim if rng.random() >= 0.05 + 0.1 * k.style.careless else "BLOCK"
            k.emit(f"x = {r} / {denom}")
        else:
            k.emit(f"x = {r}")
        ctx.vec, ctx.ch = False, None
    elif n in ("amax", "max"):
        k.emit(f"x = {_reduce(k, 'max', _masked(k, 'x', pick(rng, [(5, NEG_INF), (1, '-1e30')])))}")
        ctx.vec, ctx.ch = False, None
    elif n in ("softmax", "log_softmax"):
        if n == "softmax":
            t = k.scalar(k.tmp("temperature"), op.args["temperature"], pick(rng, [(5, "literal"), (1, "runtime")]))
            k.emit(f"x = x * {t}")
        if n == "softmax" and rng.random() < 0.08:
            k.emit(f"x = tl.softmax({_masked(k, 'x', NEG_INF)})")
            return
        if rng.random() >= k.style.careless:
            k.emit("x = tl.where(mask, x, " + pick(rng, [(5, "float('-inf')"), (1, "-1e30")]) + ")")
        m, e, d = k.tmp("m"), k.tmp("e"), k.tmp("d")
        k.emit(f"{m} = {_reduce(k, 'max', 'x')}")
        k.emit(pick(rng, [(6, f"{e} = tl.exp(x - {m})"), (2, f"{e} = tl.exp2((x - {m}) * 1.4426950408889634)"),
                          (1, f"{e} = tl.math.exp(x - {m})")]))
        k.emit(f"{d} = {_reduce(k, 'sum', e)}")
        if n == "softmax":
            k.emit(f"x = {e} / {d}")
        else:
            k.emit(pick(rng, [(5, f"x = x - {m} - tl.log({d})"), (1, f"x = (x - {m}) - tl.math.log({d})"),
                              (1, f"x = tl.log({e} / {d})")]))
    elif n == "layernorm":
        attr = op.args["attr"]
        mean, xc, var = k.tmp("mean"), k.tmp("xc"), k.tmp("var")
        eps_kind = pick(rng, [(6, "runtime"), (3, "literal"), (1, "constexpr")])
        eps = k.scalar(k.tmp("eps"), 1e-5, eps_kind)
        k.emit(f"{mean} = {_reduce(k, 'sum', _masked(k, 'x', '0.0'))} / {fdim}")
        k.emit(f"{xc} = " + _masked(k, f"x - {mean}", "0.0"))
        k.emit(f"{var} = {_reduce(k, 'sum', f'{xc} * {xc}')} / {fdim}")
        w = k.load_param(f"{attr}_w_ptr", f"self.{attr}.weight", ctx)
        b = k.load_param(f"{attr}_b_ptr", f"self.{attr}.bias", ctx)
        k.emit(f"x = {xc} * {_rsqrt(k, f'{var} + {eps}')} * {w} + {b}")
    elif n == "rmsnorm":
        ms, eps = k.tmp("ms"), op.args["eps"]
        k.emit(f"{ms} = {_reduce(k, 'sum', _masked(k, 'x * x', '0.0'))} / {fdim}")
        w = k.load_param(f"{op.args['attr']}_ptr", f"self.{op.args['attr']}", ctx)
        k.emit(f"x = x * {_rsqrt(k, f'{ms} + {eps!r}')} * {w}")
    else:  # pragma: no cover
        raise ValueError(n)


# ------------------------------------------------------------------------------------------------
# segments


def _kind(op: Op) -> str:
    if op.name in ("sum", "mean", "amax", "max", "softmax", "log_softmax", "layernorm", "rmsnorm"):
        return "row"
    if op.name.startswith("spatial_"):
        return "plane"
    if op.name == "groupnorm":
        return "group"
    return "ew"


def segments(ops: list[Op]) -> list[tuple[str, list[Op]]]:
    out: list[list] = []
    for op in ops:
        kind = _kind(op)
        cur = out[-1] if out else None
        if kind == "ew":
            if cur is None:
                out.append(["flat", [op]])
            else:
                cur[1].append(op)
            continue
        if cur is not None and cur[0] == "flat":
            cur[0] = kind
            cur[1].append(op)
        elif cur is not None and cur[0] == "row" == kind and not any(
                o.name in ("sum", "mean", "amax", "max") for o in cur[1]):
            cur[1].append(op)
        else:
            out.append([kind, [op]])
    return [(k, o) for k, o in out]


def _load_x(k: Kernel, ctx: Ctx, other: str = "0.0") -> str:
    mask = "" if k.style.mask_slip else f", mask={ctx.mask}, other={other}"
    return k.cast(f"tl.load(x_ptr + {ctx.idx}{mask})")


def _store(k: Kernel, where: str, ctx: Ctx) -> str:
    mask = "" if k.style.mask_slip or not ctx.vec else f", mask={ctx.mask}"
    return f"tl.store(out_ptr + {where}, x{mask})"


def _acc_init(k: Kernel, name: str, fill: str) -> None:
    a = k.style.acc
    if fill != "0.0" and a in ("zeros", "zeros_tuple", "zeros_nodtype"):
        a = "full"
    if a == "zeros":
        k.emit(f"{name} = tl.zeros([BLOCK], dtype=tl.float32)")
    elif a == "zeros_tuple":
        k.emit(f"{name} = tl.zeros((BLOCK,), tl.float32)")
    elif a == "zeros_nodtype":
        k.emit(f"{name} = tl.zeros(BLOCK)")
    elif a == "full":
        k.emit(f"{name} = tl.full([BLOCK], {fill}, dtype=tl.float32)")
    else:
        k.emit(f"{name} = {fill}")


def _loop(k: Kernel, bound: str) -> str:
    if k.style.loop == "static_range":
        return f"for start in tl.static_range(0, {bound}, BLOCK):"
    return f"for start in range(0, {bound}, BLOCK):"


def _flat_kernel(k: Kernel, ops: list[Op], rank: int) -> tuple[list[str], str]:
    st = k.style
    ctx = Ctx()
    k.params += ["n_elements", "C", "S", "BLOCK: tl.constexpr"]
    k.emit(f"pid = {st.pid}", "offs = pid * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n_elements", "idx = offs")
    if any(o.name in ("bias", "affine") for o in ops):
        k.emit("ch = (offs // S) % C" if rank == 4 else "ch = offs % C")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in ops:
        _ew(op, k, ctx)
    k.emit(_store(k, "idx", ctx))
    block = st.flat_block
    grid = "(x.numel() // BLOCK,)" if st.grid_slip else "(triton.cdiv(x.numel(), BLOCK),)"
    wrapper = ["y = torch.empty_like(x)", f"BLOCK = {block}", f"grid = {grid}"]
    return wrapper, "x.numel(), C, S, BLOCK=BLOCK"


def _row_kernel(k: Kernel, ops: list[Op], rank: int) -> tuple[list[str], str]:
    st = k.style
    ctx = Ctx()
    fdim = "C"
    if st.block == "constexpr_f":
        k.params += ["n_rows", "C: tl.constexpr", "S"]
        arange = "tl.arange(0, C)"
        block_arg = ""
    elif st.block == "runtime_f":
        k.params += ["n_rows", "C", "S"]
        arange = "tl.arange(0, C)"
        block_arg = ""
    else:
        k.params += ["n_rows", "C", "S", "BLOCK: tl.constexpr"]
        arange = "tl.arange(0, BLOCK)"
        block_arg = ", BLOCK=BLOCK"
    k.emit(f"row = {st.pid}")
    if rank == 4:
        k.emit("b = row // S", "s = row % S", f"ch = {arange}", "mask = ch < C", "idx = b * C * S + s + ch * S")
    else:
        k.emit(f"ch = {arange}", "mask = ch < C", "idx = row * C + ch")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in ops:
        if _kind(op) == "row":
            _row_op(op, k, ctx, fdim)
        else:
            _ew(op, k, ctx)
    reduced = not ctx.vec
    k.emit(_store(k, "row" if reduced else "idx", ctx))
    if "BLOCK" in "\n".join(k.body) and block_arg == "":
        k.params.append("BLOCK: tl.constexpr")
        block_arg = ", BLOCK=C"
    block = {"pow2": "triton.next_power_of_2(C)", "fixed": "1024"}.get(st.block, "C")
    shape = "(B, 1) + tuple(x.shape[2:])" if reduced else None
    wrapper = ["y = " + (f"torch.empty({shape}, device=x.device, dtype=x.dtype)" if reduced else "torch.empty_like(x)"),
               f"BLOCK = {block}", "grid = (B * S,)"]
    if st.block == "constexpr_f":
        return wrapper, "B * S, C=C, S=S" + block_arg
    return wrapper, "B * S, C, S" + block_arg


def _plane_kernel(k: Kernel, ops: list[Op]) -> tuple[list[str], str]:
    st = k.style
    red = next(o for o in ops if o.name.startswith("spatial_"))
    pre, post = ops[:ops.index(red)], ops[ops.index(red) + 1:]
    k.params += ["C", "S", "BLOCK: tl.constexpr"]
    ctx = Ctx(ch="c", ch_vec=False)
    k.emit(f"pid = {st.pid}", "c = pid % C", "base = pid * S")
    is_max = red.name == "spatial_amax"
    fill = "float('-inf')" if is_max else "0.0"
    _acc_init(k, "acc", fill)
    k.emit(_loop(k, "S"))
    body_start = len(k.body)
    k.emit("offs = start + tl.arange(0, BLOCK)", "mask = offs < S", "idx = base + offs")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in pre:
        _ew(op, k, ctx)
    if is_max:
        k.emit("acc = tl.maximum(acc, " + _masked(k, "x", "float('-inf')") + ")")
    else:
        k.emit("acc += " + _masked(k, "x", "0.0"))
    k.body[body_start:] = ["    " + ln for ln in k.body[body_start:]]
    if k.style.acc == "scalar":
        # a scalar accumulator: the loop adds the block's reduction instead
        k.body[-1] = "    acc = tl.maximum(acc, tl.max(" + _masked(k, "x", "float('-inf')") + ", axis=0))" if is_max \
            else "    acc += tl.sum(" + _masked(k, "x", "0.0") + ", axis=0)"
        k.emit("x = acc" if is_max else "x = acc / S")
    else:
        k.emit("x = tl.max(acc, axis=0)" if is_max else "x = tl.sum(acc, axis=0) / S")
    ctx.vec = False
    for op in post:
        _ew(op, k, ctx)
    k.emit("tl.store(out_ptr + pid, x)")
    wrapper = ["y = torch.empty((B, C, 1, 1), device=x.device, dtype=x.dtype)",
               f"BLOCK = {pick(k.rng, [(3, 1024), (2, 'triton.next_power_of_2(min(S, 4096))'), (1, 512)])}",
               "grid = (B * C,)"]
    return wrapper, "C, S, BLOCK=BLOCK"


def _group_kernel(k: Kernel, ops: list[Op]) -> tuple[list[str], str]:
    st = k.style
    gn = next(o for o in ops if o.name == "groupnorm")
    pre, post = ops[:ops.index(gn)], ops[ops.index(gn) + 1:]
    attr = gn.args["attr"]
    k.params += ["C", "S", "G", "eps", "BLOCK: tl.constexpr"]
    ctx = Ctx()
    k.emit(f"pid = {st.pid}", "g = pid % G", "CPG = C // G", "GS = CPG * S", "base = pid * GS")
    _acc_init(k, "acc_sum", "0.0")
    _acc_init(k, "acc_sq", "0.0")
    k.emit(_loop(k, "GS"))
    s0 = len(k.body)
    k.emit("offs = start + tl.arange(0, BLOCK)", "mask = offs < GS", "idx = base + offs", "ch = g * CPG + offs // S")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in pre:
        _ew(op, k, ctx)
    xv = _masked(k, "x", "0.0")
    if st.acc == "scalar":
        k.emit(f"xm = {xv}", "acc_sum += tl.sum(xm, axis=0)", "acc_sq += tl.sum(xm * xm, axis=0)")
        k.body[s0:] = ["    " + ln for ln in k.body[s0:]]
        k.emit("mean = acc_sum / GS", "var = acc_sq / GS - mean * mean")
    else:
        k.emit(f"xm = {xv}", "acc_sum += xm", "acc_sq += xm * xm")
        k.body[s0:] = ["    " + ln for ln in k.body[s0:]]
        k.emit("mean = tl.sum(acc_sum, axis=0) / GS", "var = tl.sum(acc_sq, axis=0) / GS - mean * mean")
    k.emit(f"rstd = {_rsqrt(k, 'var + eps')}")
    k.emit(_loop(k, "GS"))
    s1 = len(k.body)
    k.emit("offs = start + tl.arange(0, BLOCK)", "mask = offs < GS", "idx = base + offs", "ch = g * CPG + offs // S")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in pre:
        _ew(op, k, ctx)
    w = k.load_param(f"{attr}_w_ptr", f"self.{attr}.weight", ctx)
    b = k.load_param(f"{attr}_b_ptr", f"self.{attr}.bias", ctx)
    k.emit(f"x = (x - mean) * rstd * {w} + {b}")
    for op in post:
        _ew(op, k, ctx)
    k.emit(_store(k, "idx", ctx))
    k.body[s1:] = ["    " + ln for ln in k.body[s1:]]
    wrapper = ["y = torch.empty_like(x)", f"G = self.{attr}.num_groups",
               f"BLOCK = {pick(k.rng, [(3, 1024), (1, 2048), (1, 512)])}", "grid = (B * G,)"]
    return wrapper, f"C, S, G, self.{attr}.eps, BLOCK=BLOCK"


def _matmul_kernel(rng: random.Random, style: Style, linear: bool, has_bias: bool) -> tuple[str, list[str], set[str]]:
    bm, bn = pick(rng, [(4, (64, 64)), (2, (128, 64)), (1.5, (128, 128)), (1, (32, 32)), (0.7, (16, 16))])
    bk = pick(rng, [(5, 32), (2, 64), (1, 16), (1, 8)])
    amp = " and " if style.and_masks else " & "
    transpose = pick(rng, [(5, "ptr"), (2, "trans"), (1, "T"), (0.3, "none")]) if linear else "ptr"
    kloop = pick(rng, [(6, "range"), (3, "cdiv"), (0.7, "static")])
    dot = pick(rng, [(5, "tl.dot(a, b)"), (1.5, "tl.dot(a, b, allow_tf32=False)"),
                     (1, "tl.dot(a, b, input_precision=\"ieee\")"), (1.5, "acc"), (0.5, "tl.dot(a, b, out_dtype=tl.float32)")])
    lines = ["@triton.jit",
             "def matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,",
             "                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):",
             f"    pid_m = {style.pid}",
             f"    pid_n = {style.pid.replace('0', '1')}",
             "    rm = pid_m * BM + tl.arange(0, BM)",
             "    rn = pid_n * BN + tl.arange(0, BN)",
             "    rk = tl.arange(0, BK)",
             "    acc = tl.zeros((BM, BN), dtype=tl.float32)"]
    if kloop == "range":
        lines.append("    for k in range(0, K, BK):")
        kk = "(k + rk)"
    elif kloop == "cdiv":
        lines.append("    for k in range(0, tl.cdiv(K, BK)):")
        kk = "(k * BK + rk)"
    else:
        lines.append("    for k in tl.static_range(0, K, BK):")
        kk = "(k + rk)"
    lines.append(f"        a = tl.load(a_ptr + rm[:, None] * K + {kk}[None, :], "
                 f"mask=(rm[:, None] < M){amp}({kk}[None, :] < K), other=0.0)")
    if not linear:
        lines.append(f"        b = tl.load(b_ptr + {kk}[:, None] * N + rn[None, :], "
                     f"mask=({kk}[:, None] < K){amp}(rn[None, :] < N), other=0.0)")
    elif transpose == "ptr":
        lines.append(f"        b = tl.load(b_ptr + rn[None, :] * K + {kk}[:, None], "
                     f"mask=({kk}[:, None] < K){amp}(rn[None, :] < N), other=0.0)")
    else:
        lines.append(f"        b = tl.load(b_ptr + rn[:, None] * K + {kk}[None, :], "
                     f"mask=(rn[:, None] < N){amp}({kk}[None, :] < K), other=0.0)")
        if transpose == "trans":
            lines.append("        b = tl.trans(b)")
        elif transpose == "T":
            lines.append("        b = b.T")
    lines.append("        acc = tl.dot(a, b, acc)" if dot == "acc" else f"        acc += {dot}")
    if has_bias:
        lines.append("    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]")
    lines.append(f"    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M){amp}(rn[None, :] < N))")
    if style.grid_slip:
        grid = "(M // BM, N // BN)"
    else:
        grid = pick(rng, [(8, "(triton.cdiv(M, BM), triton.cdiv(N, BN))"),
                          (1, "lambda META: (triton.cdiv(M, META['BM']), triton.cdiv(N, META['BN']))")])
    return "\n".join(lines) + "\n", [f"BM, BN, BK = {bm}, {bn}, {bk}", f"grid = {grid}"], set()


# ------------------------------------------------------------------------------------------------
# drafts


def _draft(parsed: ParsedTask, rng: random.Random) -> str:
    style = sample_style(rng, parsed.half)
    kernels: list[str] = []
    imports: set[str] = set()
    globals_: list[str] = []
    fwd: list[str] = []
    nw = f", num_warps={style.num_warps}" if style.num_warps else ""
    # head
    head_triton = parsed.head in ("linear", "matmul") and rng.random() < 0.5
    if parsed.head == "linear":
        a = parsed.head_attr
        if head_triton:
            src, wrap, _ = _matmul_kernel(rng, style, True, True)
            kernels.append(src)
            fwd += ["x = x.contiguous()", "M, K = x.shape", f"N = self.{a}.weight.shape[0]",
                    "c = torch.empty((M, N), device=x.device, dtype=x.dtype)"] + wrap + [
                    f"matmul_kernel[grid](x, self.{a}.weight, self.{a}.bias, c, M, N, K, BM=BM, BN=BN, BK=BK)",
                    "x = c"]
        else:
            fwd.append(pick(rng, [(2, f"x = F.linear(x, self.{a}.weight, self.{a}.bias)"), (1, f"x = self.{a}(x)")]))
    elif parsed.head == "matmul":
        if head_triton:
            src, wrap, _ = _matmul_kernel(rng, style, False, False)
            kernels.append(src)
            fwd += ["x = x.contiguous()", "w = w.contiguous()", "M, K = x.shape", "N = w.shape[1]",
                    "c = torch.empty((M, N), device=x.device, dtype=x.dtype)"] + wrap + [
                    "matmul_kernel[grid](x, w, x, c, M, N, K, BM=BM, BN=BN, BK=BK)", "x = c"]
        else:
            fwd.append(pick(rng, [(2, "x = torch.matmul(x, w)"), (1, "x = x @ w")]))
    elif parsed.head == "module":
        fwd.append(f"x = self.{parsed.head_attr}(x)")
    fwd.append("x = x.contiguous()")
    tail = list(parsed.ops)
    plan = []
    if parsed.uses_residual and tail and tail[0].name in ("affine", "square", "abs"):
        # the residual adds the pointwise head's output: the head gets its own kernel, then h = x
        plan.append(("flat", [tail.pop(0)]))
        plan.append(("h", []))
    elif parsed.uses_residual:
        plan.append(("h", []))
    plan += segments(tail)
    i = -1
    for layout, ops in plan:
        if layout == "h":
            fwd.append("h = x")
            continue
        i += 1
        name = pick(rng, [(3, f"fused_{layout}_kernel_{i}"), (1, f"kernel_{i}")])
        k = Kernel(name, rng, style, parsed.half)
        fwd += ["B, C = x.shape[0], x.shape[1]", "S = x.numel() // (B * C)"]
        if layout == "flat":
            wrap, args = _flat_kernel(k, ops, parsed.rank)
        elif layout == "row":
            wrap, args = _row_kernel(k, ops, parsed.rank)
        elif layout == "plane":
            wrap, args = _plane_kernel(k, ops)
        else:
            wrap, args = _group_kernel(k, ops)
        fwd += wrap
        # launch: x, y, the pointers / runtime scalars the ops added, the layout's dims, then keywords;
        # the kernel's parameters are reordered below to match
        pos = [a for a in k.launch[2:] if "=" not in a]
        kw = [a for a in k.launch[2:] if "=" in a]
        call_args = ["x", "y"] + pos + [args] + kw
        fwd.append(f"{name}[grid]({', '.join(call_args)}{nw})")
        fwd.append("x = y")
        # reorder the kernel params so that pointer/scalar params come before the dims (as launched)
        dims = [p for p in k.params[2:] if p in ("n_elements", "n_rows", "C", "S", "G", "eps") or p.startswith(
            ("C:", "BLOCK"))]
        others = [p for p in k.params[2:] if p not in dims]
        const_kw = [p for p in others if p.endswith("tl.constexpr")]
        others = [p for p in others if not p.endswith("tl.constexpr")]
        k.params = ["x_ptr", "out_ptr"] + others + [d for d in dims if not d.startswith("BLOCK")] + const_kw + [
            d for d in dims if d.startswith("BLOCK")]
        kernels.append(k.source())
        imports |= k.imports
        globals_ += [g for g in k.globals if g not in globals_]
    out = HEADER + "".join(f"{i}\n" for i in sorted(imports)) + "".join(f"{g}\n" for g in globals_) + "\n\n"
    out += "\n\n".join(kernels) + "\n\n"
    init = _indent_init(parsed.init_source)
    out += "class ModelNew(nn.Module):\n" + init + "\n\n"
    out += f"    def forward(self, {', '.join(parsed.forward_args)}):\n"
    out += "".join(f"        {ln}\n" for ln in fwd) + "        return x\n"
    return out


def _indent_init(text: str) -> str:
    """The reference's __init__ (first line unindented, the rest as in the file) at class-body indentation."""
    import textwrap

    first, *rest = text.splitlines()
    body = textwrap.indent(textwrap.dedent("\n".join(rest)), " " * 8)
    return "    " + first + ("\n" + body if rest else "")


def draft_kernels(task: Any, rng: random.Random, count: int = 4) -> list[str]:
    """`count` ModelNew candidates for `task` (a SynthesizedTask, or (ops, source)); deterministic in `rng`."""
    source = task[1] if isinstance(task, tuple) else task.source
    parsed = parse_task(source)
    return [_draft(parsed, rng) for _ in range(count)]
