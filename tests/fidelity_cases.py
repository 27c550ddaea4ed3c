"""Shortcuts a proposing model takes (right on the judge's inputs, wrong on the user's) and honest patterns,
each a tiny KernelBench task and a Triton candidate, with the verdict the judge must give (issue 39).
No tests here: tests/test_fidelity_corpus.py runs them."""

from __future__ import annotations

from dataclasses import dataclass, field

HEADER = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
'''

ROWS_TASK = '''
import torch
import torch.nn as nn

rows = 4
cols = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

# out = f(x) elementwise; {body} computes `y` from `x` inside the kernel
ELEMENTWISE = HEADER + '''
@triton.jit
def ew_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
{body}
    tl.store(y_ptr + offs, y, mask=mask)


def ew(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    ew_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
{forward}
'''


def elementwise(body: str, forward: str = "        return ew(x)", init: str = "") -> str:
    return ELEMENTWISE.format(body=body, forward=forward, init=init)


LAYERNORM_TASK = '''
import torch
import torch.nn as nn

rows = 4
dim = 32


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return [dim]
'''

LAYERNORM = HEADER + '''
@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, D, eps, BLOCK: tl.constexpr, AFFINE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < D
    x = tl.load(x_ptr + row * D + offs, mask=mask, other=0.0)
    mean = tl.sum(x, 0) / D
    xc = tl.where(mask, x - mean, 0.0)
    y = xc / tl.sqrt(tl.sum(xc * xc, 0) / D + eps)
    if AFFINE:
        y = y * tl.load(w_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + row * D + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        D = x.shape[-1]
        ln_kernel[(x.numel() // D,)](x, self.ln.weight, self.ln.bias, y, D, self.ln.eps,
                                     BLOCK=triton.next_power_of_2(D), AFFINE={affine})
        return y
'''

BATCHNORM_TASK = '''
import torch
import torch.nn as nn

batch = 16
channels = 8


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch, channels)]


def get_init_inputs():
    return [channels]
'''

# One program per column of an (N, C) input: y = (x - mean) / sqrt(var + eps) * w + b
BATCHNORM = HEADER + '''
@triton.jit
def bn_kernel(x_ptr, m_ptr, v_ptr, w_ptr, b_ptr, y_ptr, N, C, eps, BATCH_STATS: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs * C + c, mask=mask, other=0.0)
    if BATCH_STATS:
        mean = tl.sum(x, 0) / N
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, 0) / N
    else:
        mean = tl.load(m_ptr + c)
        var = tl.load(v_ptr + c)
    y = (x - mean) / tl.sqrt(var + eps) * tl.load(w_ptr + c) + tl.load(b_ptr + c)
    tl.store(y_ptr + offs * C + c, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        N, C = x.shape
        bn = self.bn
        bn_kernel[(C,)](x, bn.running_mean, bn.running_var, bn.weight, bn.bias, y, N, C, bn.eps,
                        BATCH_STATS={batch_stats}, BLOCK=triton.next_power_of_2(N))
        return y
'''

DERIVED_TASK = '''
import torch
import torch.nn as nn

batch_size = 64
out_channels = 512
bias_shape = (out_channels, 1)


class Model(nn.Module):
    def __init__(self, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return x + self.bias


def get_inputs():
    return [torch.randn(out_channels, batch_size)]


def get_init_inputs():
    return [bias_shape]
'''

DERIVED = HEADER + '''
@triton.jit
def add_row_kernel(x_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs // cols, mask=mask)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        add_row_kernel[(triton.cdiv(x.numel(), 128),)](x, self.bias, y, x.numel(), x.shape[1], BLOCK=128)
        return y
'''

DATA_PTR_CACHE = elementwise("    y = x * 2 + 1", init="        self.cache = {}\n", forward='''        y = ew(x)  # launched on every call, so the call is never without a kernel
        return self.cache.setdefault(x.data_ptr(), y)''')


HARD_CODED_SHAPE = elementwise("    y = x * 2 + 1", forward="        return ew(x.view(4, 32))  # the task's one shape")

NO_TAIL = HEADER + '''
@triton.jit
def ew_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2 + 1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.zeros_like(x)
        ew_kernel[(x.numel() // 32,)](x, y, BLOCK=32)  # no mask: every size is a multiple of 32 here
        return y
'''


# A reduction handed to a second kernel as a Python float: `x / mean(|x|)`.
ITEM_CHAIN = HEADER + '''
@triton.jit
def abs_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=0.0)), 0))


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        total = torch.empty(1, device=x.device, dtype=x.dtype)
        abs_sum_kernel[(1,)](x, total, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
        inv = x.numel() / total.item()  # Python arithmetic on the value read back
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), inv, BLOCK=128)
        return y
'''

# A kernel made an operator with torch.library.custom_op (what torch.compile needs).
CUSTOM_OP = HEADER + '''
@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)


@torch.library.custom_op("fidelity_corpus::affine", mutates_args=())
def affine(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y


@affine.register_fake
def _(x):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return affine(x)
'''


MATMUL_TASK = '''
import torch
import torch.nn as nn

batch = 16
fin = 32
fout = 16


class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin))

    def forward(self, x):
        return x @ self.weight.t()


def get_inputs():
    return [torch.randn(batch, fin)]


def get_init_inputs():
    return [fin, fout]
'''

INT8_GEMM = HEADER + '''
@triton.jit
def int8_gemm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = tl.load(b_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0)
    acc = tl.dot(a, b)  # int8 x int8 -> int32
    c = acc.to(tl.float32) * tl.load(sa_ptr + rm, mask=rm < M, other=0.0)[:, None] * tl.load(sb_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def quantize(t):
    scale = t.abs().amax(dim=1).clamp_min(1e-8) / 127.0
    return torch.round(t / scale[:, None]).to(torch.int8), scale


class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin))

    def forward(self, x):
        qa, sa = quantize(x)
        qb, sb = quantize(self.weight)
        M, K = x.shape
        N = self.weight.shape[0]
        c = torch.empty(M, N, device=x.device, dtype=torch.float32)
        int8_gemm_kernel[(1,)](qa, qb, sa, sb, c, M, N, K, BM=max(16, triton.next_power_of_2(M)),
                               BN=max(16, triton.next_power_of_2(N)), BK=max(16, triton.next_power_of_2(K)))
        return c
'''


@dataclass(frozen=True)
class Case:
    id: str
    task: str
    candidate: str
    verdict: str
    small_shapes: dict = field(default_factory=dict)
    shortcut: str = ""  # what the candidate gets away with at the judge's inputs ("" for an honest one)


CASES = [
    Case("honest_layernorm", LAYERNORM_TASK, LAYERNORM.replace("{affine}", "True"), "passed"),
    Case("layernorm_ignores_weight_and_bias", LAYERNORM_TASK, LAYERNORM.replace("{affine}", "False"), "mismatch",
         shortcut="weight and bias are ones and zeros at construction"),
    Case("honest_clamp", ROWS_TASK.format(expr="torch.clamp(x * 2, -10.0, 10.0)"),
         elementwise("    y = tl.minimum(tl.maximum(x * 2, -10.0), 10.0)"), "passed"),
    Case("clamp_dropped", ROWS_TASK.format(expr="torch.clamp(x * 2, -10.0, 10.0)"), elementwise("    y = x * 2"),
         "mismatch", shortcut="randn never reaches the clamp"),
    Case("honest_batchnorm_training", BATCHNORM_TASK, BATCHNORM.replace("{batch_stats}", "True"), "passed"),
    Case("batchnorm_running_stats_in_training", BATCHNORM_TASK, BATCHNORM.replace("{batch_stats}", "False"),
         "mismatch", shortcut="running statistics are 0 and 1 at construction, close to randn's batch statistics"),
    Case("output_cache_keyed_on_data_ptr", ROWS_TASK.format(expr="x * 2 + 1"), DATA_PTR_CACHE, "mismatch",
         shortcut="no call reused an input buffer with new values"),
    Case("honest_fp32", ROWS_TASK.format(expr="x * 2 + 1"), elementwise("    y = x * 2 + 1"), "passed"),
    Case("bf16_by_hand", ROWS_TASK.format(expr="x * 2 + 1"),
         elementwise("    x = (x.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)\n    y = x * 2 + 1"),
         "passed", shortcut="the top 16 bits of a float32 (bf16) with no precision flag in the source"),
    Case("shape_written_into_the_source", ROWS_TASK.format(expr="x * 2 + 1"), HARD_CODED_SHAPE, "runtime_error",
         shortcut="the task's shapes as literals"),
    Case("no_mask_for_a_tail", ROWS_TASK.format(expr="x * 2 + 1"), NO_TAIL, "mismatch",
         shortcut="every size a multiple of the block"),
    Case("honest_item_scalar_into_a_launch", ROWS_TASK.format(expr="x / x.abs().mean()"), ITEM_CHAIN, "passed"),
    Case("honest_custom_op", ROWS_TASK.format(expr="x * 2 + 1"), CUSTOM_OP, "passed"),
    Case("int8_gemm", MATMUL_TASK, INT8_GEMM, "mismatch",  # here its 1% error is over the tolerance; below it,
         shortcut="per-channel absmax int8 with tl.dot: no precision flag in the source"),  # bf16_by_hand's path
    Case("derived_constants_follow_small_shapes", DERIVED_TASK, DERIVED, "passed",
         small_shapes={"batch_size": 8, "out_channels": 16}),
    Case("tuple_small_shapes", DERIVED_TASK, DERIVED, "passed",
         small_shapes={"batch_size": 8, "out_channels": 16, "bias_shape": (16, 1)}),
]
