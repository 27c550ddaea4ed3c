"""Emitting a synthesized operator chain as KernelBench source (top-level shape constants + small shapes).

Split from synthesis.py (which draws, mutates and recombines chains) so each module holds one idea.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adaexplore_mcp.tasks.synthesis import Chain


def _emit(chain: Chain) -> tuple[str, list[str], str, dict[str, int]] | None:
    """Replay the chain into source; returns (source, op names, description, small_shapes)."""
    from adaexplore_mcp.tasks.synthesis import ACTIVATIONS, _legal  # the chain vocabulary lives there
    d = chain.dims
    dt = chain.dtype
    dtype_kw = "" if dt == "float32" else f", dtype=torch.{dt}"
    init_args: list[str] = []
    init_lines: list[str] = []
    fwd: list[str] = []
    consts = dict(d)
    small = dict(chain.small)
    inputs: list[str] = []
    fwd_args = ["x"]
    desc_parts: list[str] = []

    def arg(name: str) -> str:
        if name not in init_args:
            init_args.append(name)
        return name

    h = chain.head
    if h == "pointwise":
        feat = "features" if chain.rank == 2 else "channels"
        shape_names = ["batch_size", "features"] if chain.rank == 2 else ["batch_size", "channels", "height", "width"]
        inputs.append(f"torch.randn({', '.join(shape_names)}{dtype_kw})")
        op = chain.head_args["op"]
        if op == "affine":
            pshape = arg(feat) if chain.rank == 2 else f"{arg(feat)}, 1, 1"
            init_lines.append(f"self.in_scale = nn.Parameter(torch.randn({pshape}{dtype_kw}) * 0.5 + 1.0)")
            init_lines.append(f"self.in_shift = nn.Parameter(torch.randn({pshape}{dtype_kw}) * 0.5)")
            fwd.append("x = x * self.in_scale + self.in_shift")
            desc_parts.append("per-feature affine (x*scale+shift)" if chain.rank == 2 else "per-channel affine")
        elif op == "square":
            fwd.append("x = x * x")
            desc_parts.append("square")
        else:
            fwd.append("x = torch.abs(x)")
            desc_parts.append("abs")
        head_name = f"pointwise_{op}"
    elif h == "linear":
        feat = "out_features"
        inputs.append(f"torch.randn(batch_size, in_features{dtype_kw})")
        init_lines.append(f"self.linear = nn.Linear({arg('in_features')}, {arg('out_features')}{dtype_kw})")
        fwd.append("x = self.linear(x)")
        desc_parts.append(f"Linear({d['in_features']}->{d['out_features']})")
        head_name = "linear"
    elif h == "matmul":
        feat = "features"
        inputs.append(f"torch.randn(batch_size, inner{dtype_kw})")
        inputs.append(f"torch.randn(inner, features{dtype_kw}) * 0.05")
        fwd_args = ["x", "w"]
        fwd.append("x = torch.matmul(x, w)")
        desc_parts.append(f"matmul ({d['batch_size']}x{d['inner']}) @ ({d['inner']}x{d['features']})")
        head_name = "matmul"
    elif h == "conv2d":
        feat = "out_channels"
        inputs.append(f"torch.randn(batch_size, in_channels, height, width{dtype_kw})")
        pad = chain.head_args["padding"]
        init_lines.append(f"self.conv = nn.Conv2d({arg('in_channels')}, {arg('out_channels')}, {arg('kernel_size')}, "
                          f"padding={pad}{dtype_kw})")
        fwd.append("x = self.conv(x)")
        desc_parts.append(f"Conv2d({d['in_channels']}->{d['out_channels']}, k={d['kernel_size']}, pad={pad})")
        head_name = "conv2d"
    else:
        feat = "channels"
        inputs.append(f"torch.randn(batch_size, channels, height, width{dtype_kw})")
        k, s, p = chain.head_args["kernel"], chain.head_args["stride"], chain.head_args["padding"]
        if h == "maxpool2d":
            init_lines.append(f"self.pool = nn.MaxPool2d(kernel_size={k}, stride={s}, padding={p})")
            desc_parts.append(f"MaxPool2d(k={k}, s={s}, p={p})")
        else:
            init_lines.append(f"self.pool = nn.AvgPool2d(kernel_size={k}, stride={s}, padding={p})")
            desc_parts.append(f"AvgPool2d(k={k}, s={s}, p={p})")
        fwd.append("x = self.pool(x)")
        head_name = h

    state = {"rank": chain.rank, "feat": feat, "spatial": True, "same_as_head": True, "n_ops": 0}
    used_ops: list[str] = [head_name]
    needs_h = any(op == "residual" for op, _ in chain.ops)
    if needs_h:
        fwd.append("h = x")
    n_bias = n_norm = 0
    for op, a in chain.ops:
        if not _legal(op, state):
            continue
        f = state["feat"]
        if op in ACTIVATIONS:
            fwd.append(f"x = {ACTIVATIONS[op]}")
            desc_parts.append(op)
        elif op == "scale":
            fwd.append(f"x = x * {a['value']!r}")
            desc_parts.append(f"scale by {a['value']}")
        elif op == "clamp":
            fwd.append(f"x = torch.clamp(x, min={a['lo']!r}, max={a['hi']!r})")
            desc_parts.append(f"clamp [{a['lo']}, {a['hi']}]")
        elif op == "bias":
            n_bias += 1
            bshape = arg(f) if state["rank"] == 2 else f"{arg(f)}, 1, 1"
            init_lines.append(f"self.bias{n_bias} = nn.Parameter(torch.randn({bshape}{dtype_kw}) * 0.5)")
            fwd.append(f"x = x + self.bias{n_bias}")
            desc_parts.append("bias add")
        elif op == "residual":
            fwd.append("x = x + h")
            desc_parts.append("residual add of the head output")
        elif op in ("sum", "mean", "amax"):
            fwd.append(f"x = torch.{op}(x, dim=1, keepdim=True)")
            desc_parts.append(f"{op} over dim 1 (keepdim)")
            state["feat"] = None
        elif op == "max":
            fwd.append("x = torch.max(x, dim=1, keepdim=True)[0]")
            desc_parts.append("max over dim 1 (keepdim)")
            state["feat"] = None
        elif op in ("spatial_mean", "spatial_amax"):
            fn = "mean" if op == "spatial_mean" else "amax"
            fwd.append(f"x = torch.{fn}(x, dim=(2, 3), keepdim=True)")
            desc_parts.append(f"{fn} over H, W (keepdim)")
            state["spatial"] = False
        elif op == "softmax":
            fwd.append(f"x = torch.softmax(x * {a['temperature']!r}, dim=1)")
            desc_parts.append(f"softmax over dim 1 (logits x{a['temperature']})")
        elif op == "log_softmax":
            fwd.append("x = torch.log_softmax(x, dim=1)")
            desc_parts.append("log_softmax over dim 1")
        elif op == "layernorm":
            n_norm += 1
            init_lines.append(f"self.norm{n_norm} = nn.LayerNorm({arg(f)}{dtype_kw})")
            fwd.append(f"x = self.norm{n_norm}(x)")
            desc_parts.append("layernorm over features")
        elif op == "rmsnorm":
            n_norm += 1
            init_lines.append(f"self.norm{n_norm}_weight = nn.Parameter(torch.ones({arg(f)}{dtype_kw}))")
            fwd.append(f"x = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * self.norm{n_norm}_weight")
            desc_parts.append("rmsnorm over features")
        elif op == "groupnorm":
            n_norm += 1
            gname = f"num_groups{n_norm}" if n_norm > 1 else "num_groups"
            consts[gname] = a["groups"]
            small[gname] = a["groups"]
            init_lines.append(f"self.norm{n_norm} = nn.GroupNorm({arg(gname)}, {arg(f)}{dtype_kw})")
            fwd.append(f"x = self.norm{n_norm}(x)")
            desc_parts.append(f"groupnorm ({a['groups']} groups)")
        else:  # pragma: no cover - unknown op names are never generated
            continue
        used_ops.append(op)
        state["n_ops"] += 1
        if op in ("sum", "mean", "amax", "max", "spatial_mean", "spatial_amax"):
            state["same_as_head"] = False
    if state["n_ops"] == 0:
        return None
    if "residual" not in used_ops and needs_h:
        fwd.remove("h = x")

    description = ", then ".join(desc_parts[:1] + desc_parts[1:])
    shape_txt = ", ".join(f"{k}={v}" for k, v in consts.items())
    description = f"{description}; {shape_txt}; {dt}"
    lines = [
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "",
        "class Model(nn.Module):",
        f'    """Synthesized chain: {" -> ".join(used_ops)} ({dt})."""',
        "",
        f"    def __init__(self{''.join(', ' + a for a in init_args)}):",
        "        super().__init__()",
    ]
    lines += [f"        {ln}" for ln in init_lines]
    lines += ["", f"    def forward(self, {', '.join(fwd_args)}):"]
    lines += [f"        {ln}" for ln in fwd]
    lines += ["        return x", "", ""]
    lines += [f"{k} = {v}" for k, v in consts.items()]
    lines += ["", "", "def get_inputs():", f"    return [{', '.join(inputs)}]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(init_args)}]", ""]
    small = {k: v for k, v in small.items() if k in consts}
    return "\n".join(lines), used_ops, description, small
