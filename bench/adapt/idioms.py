"""The first-draft writer's habits, and how it writes each op of a chain into a Triton kernel body.

Per-draft habits (`Style`) pick among idioms the way an LLM assistant's first drafts do: mostly canonical,
sometimes one the compiler or interpreter rejects, now and then a logic slip. `Kernel` accumulates one
kernel's parameters, launch arguments and body; `elementwise` and `row_op` append one op to it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bench.adapt.parse import Op

NEG_INF = "float('-inf')"


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


def elementwise(op: Op, k: Kernel, ctx: Ctx, model_attr: str = "self") -> None:
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


def masked(k: Kernel, expr: str, fill: str) -> str:
    """x with the padded lanes set to `fill`, or (careless) not."""
    if k.rng.random() < k.style.careless:
        return expr
    return f"tl.where(mask, {expr}, {fill})"


def reduce_expr(k: Kernel, fn: str, expr: str) -> str:
    return pick(k.rng, [(6, f"tl.{fn}({expr}, axis=0)"), (1.5, f"tl.{fn}({expr}, 0)"),
                        (1, f"tl.{fn}({expr}, axis=-1)"), (0.6, f"({expr}).{fn}(axis=0)"),
                        (0.25, f"tl.{fn}({expr}, axis=1)")])


def rsqrt(k: Kernel, expr: str) -> str:
    v = pick(k.rng, [(5, "tl.rsqrt"), (3, "div"), (1, "tl.math.rsqrt"), (0.6, "libdevice.rsqrt")])
    if v == "div":
        return f"1.0 / tl.sqrt({expr})"
    if v.startswith("libdevice"):
        k.imports.add("from triton.language.extra import libdevice")
    return f"{v}({expr})"


def row_op(op: Op, k: Kernel, ctx: Ctx, fdim: str) -> None:
    rng, n = k.rng, op.name
    if n in ("sum", "mean"):
        r = reduce_expr(k, "sum", masked(k, "x", "0.0"))
        if n == "mean":
            denom = fdim if rng.random() >= 0.05 + 0.1 * k.style.careless else "BLOCK"
            k.emit(f"x = {r} / {denom}")
        else:
            k.emit(f"x = {r}")
        ctx.vec, ctx.ch = False, None
    elif n in ("amax", "max"):
        k.emit(f"x = {reduce_expr(k, 'max', masked(k, 'x', pick(rng, [(5, NEG_INF), (1, '-1e30')])))}")
        ctx.vec, ctx.ch = False, None
    elif n in ("softmax", "log_softmax"):
        if n == "softmax":
            t = k.scalar(k.tmp("temperature"), op.args["temperature"], pick(rng, [(5, "literal"), (1, "runtime")]))
            k.emit(f"x = x * {t}")
        if n == "softmax" and rng.random() < 0.08:
            k.emit(f"x = tl.softmax({masked(k, 'x', NEG_INF)})")
            return
        if rng.random() >= k.style.careless:
            k.emit("x = tl.where(mask, x, " + pick(rng, [(5, "float('-inf')"), (1, "-1e30")]) + ")")
        m, e, d = k.tmp("m"), k.tmp("e"), k.tmp("d")
        k.emit(f"{m} = {reduce_expr(k, 'max', 'x')}")
        k.emit(pick(rng, [(6, f"{e} = tl.exp(x - {m})"), (2, f"{e} = tl.exp2((x - {m}) * 1.4426950408889634)"),
                          (1, f"{e} = tl.math.exp(x - {m})")]))
        k.emit(f"{d} = {reduce_expr(k, 'sum', e)}")
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
        k.emit(f"{mean} = {reduce_expr(k, 'sum', masked(k, 'x', '0.0'))} / {fdim}")
        k.emit(f"{xc} = " + masked(k, f"x - {mean}", "0.0"))
        k.emit(f"{var} = {reduce_expr(k, 'sum', f'{xc} * {xc}')} / {fdim}")
        w = k.load_param(f"{attr}_w_ptr", f"self.{attr}.weight", ctx)
        b = k.load_param(f"{attr}_b_ptr", f"self.{attr}.bias", ctx)
        k.emit(f"x = {xc} * {rsqrt(k, f'{var} + {eps}')} * {w} + {b}")
    elif n == "rmsnorm":
        ms, eps = k.tmp("ms"), op.args["eps"]
        k.emit(f"{ms} = {reduce_expr(k, 'sum', masked(k, 'x * x', '0.0'))} / {fdim}")
        w = k.load_param(f"{op.args['attr']}_ptr", f"self.{op.args['attr']}", ctx)
        k.emit(f"x = x * {rsqrt(k, f'{ms} + {eps!r}')} * {w}")
    else:  # pragma: no cover
        raise ValueError(n)

