"""Layout segments of a chain's tail and the kernel each layout gets (see bench/adapt/codegen.py).

- flat:  elementwise-only chains (one program per BLOCK of elements),
- row:   ops over dim 1: one program per row (b, h, w) holding all of dim 1 in one block,
- plane: a reduction over (H, W): one program per (b, c) looping over H*W,
- group: groupnorm: one program per (b, group), two passes over its contiguous C/G*H*W elements;
plus the Linear / matmul head as a tl.dot kernel.
"""

from __future__ import annotations

import random

from bench.adapt.idioms import Ctx, Kernel, Style, elementwise, masked, pick, row_op, rsqrt
from bench.adapt.parse import Op


def op_kind(op: Op) -> str:
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
        kind = op_kind(op)
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


def flat_kernel(k: Kernel, ops: list[Op], rank: int) -> tuple[list[str], str]:
    st = k.style
    ctx = Ctx()
    k.params += ["n_elements", "C", "S", "BLOCK: tl.constexpr"]
    k.emit(f"pid = {st.pid}", "offs = pid * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n_elements", "idx = offs")
    if any(o.name in ("bias", "affine") for o in ops):
        k.emit("ch = (offs // S) % C" if rank == 4 else "ch = offs % C")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in ops:
        elementwise(op, k, ctx)
    k.emit(_store(k, "idx", ctx))
    block = st.flat_block
    grid = "(x.numel() // BLOCK,)" if st.grid_slip else "(triton.cdiv(x.numel(), BLOCK),)"
    wrapper = ["y = torch.empty_like(x)", f"BLOCK = {block}", f"grid = {grid}"]
    return wrapper, "x.numel(), C, S, BLOCK=BLOCK"


def row_kernel(k: Kernel, ops: list[Op], rank: int) -> tuple[list[str], str]:
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
        if op_kind(op) == "row":
            row_op(op, k, ctx, fdim)
        else:
            elementwise(op, k, ctx)
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


def plane_kernel(k: Kernel, ops: list[Op]) -> tuple[list[str], str]:
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
        elementwise(op, k, ctx)
    if is_max:
        k.emit("acc = tl.maximum(acc, " + masked(k, "x", "float('-inf')") + ")")
    else:
        k.emit("acc += " + masked(k, "x", "0.0"))
    k.body[body_start:] = ["    " + ln for ln in k.body[body_start:]]
    if k.style.acc == "scalar":
        # a scalar accumulator: the loop adds the block's reduction instead
        k.body[-1] = "    acc = tl.maximum(acc, tl.max(" + masked(k, "x", "float('-inf')") + ", axis=0))" if is_max \
            else "    acc += tl.sum(" + masked(k, "x", "0.0") + ", axis=0)"
        k.emit("x = acc" if is_max else "x = acc / S")
    else:
        k.emit("x = tl.max(acc, axis=0)" if is_max else "x = tl.sum(acc, axis=0) / S")
    ctx.vec = False
    for op in post:
        elementwise(op, k, ctx)
    k.emit("tl.store(out_ptr + pid, x)")
    wrapper = ["y = torch.empty((B, C, 1, 1), device=x.device, dtype=x.dtype)",
               f"BLOCK = {pick(k.rng, [(3, 1024), (2, 'triton.next_power_of_2(min(S, 4096))'), (1, 512)])}",
               "grid = (B * C,)"]
    return wrapper, "C, S, BLOCK=BLOCK"


def group_kernel(k: Kernel, ops: list[Op]) -> tuple[list[str], str]:
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
        elementwise(op, k, ctx)
    xv = masked(k, "x", "0.0")
    if st.acc == "scalar":
        k.emit(f"xm = {xv}", "acc_sum += tl.sum(xm, axis=0)", "acc_sq += tl.sum(xm * xm, axis=0)")
        k.body[s0:] = ["    " + ln for ln in k.body[s0:]]
        k.emit("mean = acc_sum / GS", "var = acc_sq / GS - mean * mean")
    else:
        k.emit(f"xm = {xv}", "acc_sum += xm", "acc_sq += xm * xm")
        k.body[s0:] = ["    " + ln for ln in k.body[s0:]]
        k.emit("mean = tl.sum(acc_sum, axis=0) / GS", "var = tl.sum(acc_sq, axis=0) / GS - mean * mean")
    k.emit(f"rstd = {rsqrt(k, 'var + eps')}")
    k.emit(_loop(k, "GS"))
    s1 = len(k.body)
    k.emit("offs = start + tl.arange(0, BLOCK)", "mask = offs < GS", "idx = base + offs", "ch = g * CPG + offs // S")
    k.emit(f"x = {_load_x(k, ctx)}")
    for op in pre:
        elementwise(op, k, ctx)
    w = k.load_param(f"{attr}_w_ptr", f"self.{attr}.weight", ctx)
    b = k.load_param(f"{attr}_b_ptr", f"self.{attr}.bias", ctx)
    k.emit(f"x = (x - mean) * rstd * {w} + {b}")
    for op in post:
        elementwise(op, k, ctx)
    k.emit(_store(k, "idx", ctx))
    k.body[s1:] = ["    " + ln for ln in k.body[s1:]]
    wrapper = ["y = torch.empty_like(x)", f"G = self.{attr}.num_groups",
               f"BLOCK = {pick(k.rng, [(3, 1024), (1, 2048), (1, 512)])}", "grid = (B * G,)"]
    return wrapper, f"C, S, G, self.{attr}.eps, BLOCK=BLOCK"


def matmul_kernel_source(rng: random.Random, style: Style, linear: bool, has_bias: bool) -> tuple[str, list[str], set[str]]:
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

