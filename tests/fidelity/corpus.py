"""The fidelity corpus: KernelBench-style references and Triton candidates, each with the verdict the
judge's conventions call for. No tests here (see test_corpus.py).

Conventions under test (adaexplore_mcp/judge/evaluation.py):
- Model and ModelNew are built from get_init_inputs() under the same fresh seed, never `.eval()`-ed
  (BatchNorm uses batch statistics), and called under torch.no_grad();
- on a mismatch the check runs again with the reference's parameters and buffers copied into ModelNew
  by name: right under either line-up is `passed` (Evaluation.lineup names it), wrong under both is
  `mismatch` with `mismatch` and `mismatch_copied`;
- the tolerance follows the reference output's dtype; precision flags fire only below the task's own.

Shapes are tiny (a few hundred elements; convolutions on 2x3x8x8) so each evaluation takes a second or
two under Triton's CPU interpreter. Candidates compute in Triton kernels only (a matmul or a conv too: the work
policy, docs/judge.md, rejects PyTorch's); torch allocates and arranges data around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEADER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
'''

# ------------------------------------------------------------------------------------------------ kernels

# y = x @ w.t() for a row-major (M, K) x and (N, K) w: one program per row of y
MATMUL_NT = '''
@triton.jit
def matmul_nt_kernel(x_ptr, w_ptr, y_ptr, N, K, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0)
    n = tl.arange(0, BN)[:, None]
    k = tl.arange(0, BK)[None, :]
    x = tl.load(x_ptr + m * K + k, mask=k < K, other=0.0)
    w = tl.load(w_ptr + n * K + k, mask=(n < N) & (k < K), other=0.0)
    cols = tl.arange(0, BN)
    tl.store(y_ptr + m * N + cols, tl.sum(x * w, 1), mask=cols < N)


def matmul_nt(x, w):
    x, w = x.contiguous(), w.contiguous()
    y = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
    matmul_nt_kernel[(x.shape[0],)](x, w, y, w.shape[0], x.shape[1], BN=triton.next_power_of_2(w.shape[0]),
                                    BK=triton.next_power_of_2(x.shape[1]))
    return y
'''

# A valid (no padding, stride 1) NCHW convolution with bias: one program per (image, output channel)
CONV2D = '''
@triton.jit
def conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, CO, OH, OW, KH: tl.constexpr, KW: tl.constexpr,
                  BP: tl.constexpr, BR: tl.constexpr):
    n = tl.program_id(0) // CO
    co = tl.program_id(0) % CO
    p = tl.arange(0, BP)[:, None]
    r = tl.arange(0, BR)[None, :]
    ci, kh, kw = r // (KH * KW), (r // KW) % KH, r % KW
    rm = r < C * KH * KW
    x = tl.load(x_ptr + n * C * H * W + ci * H * W + (p // OW + kh) * W + (p % OW + kw), mask=(p < OH * OW) & rm,
                other=0.0)
    w = tl.load(w_ptr + co * C * KH * KW + r, mask=rm, other=0.0)
    out = tl.arange(0, BP)
    tl.store(y_ptr + (n * CO + co) * OH * OW + out, tl.sum(x * w, 1) + tl.load(b_ptr + co), mask=out < OH * OW)


def conv2d(x, w, b):
    x, w = x.contiguous(), w.contiguous()
    N, C, H, W = x.shape
    CO, _, KH, KW = w.shape
    OH, OW = H - KH + 1, W - KW + 1
    y = torch.empty(N, CO, OH, OW, device=x.device, dtype=x.dtype)
    conv2d_kernel[(N * CO,)](x, w, b, y, C, H, W, CO, OH, OW, KH=KH, KW=KW, BP=triton.next_power_of_2(OH * OW),
                             BR=triton.next_power_of_2(C * KH * KW))
    return y
'''

# out[i] = y[i] + b[i % cols]  (a row-major (rows, cols) tensor plus a per-column vector)
ADD_COLUMN_KERNEL = '''
@triton.jit
def add_column_kernel(y_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, y + b, mask=mask)
'''

# out[i] = x[i] * s[i % cols] (+ t[i % cols])
COLUMN_AFFINE_KERNEL = '''
@triton.jit
def column_affine_kernel(x_ptr, s_ptr, t_ptr, out_ptr, n, cols, HAS_SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = x * tl.load(s_ptr + offs % cols, mask=mask)
    if HAS_SHIFT:
        y += tl.load(t_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, y, mask=mask)
'''

# NCHW: out = relu(x + bias[c])
BIAS_RELU_NCHW_KERNEL = '''
@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, out_ptr, n, C, HW, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // HW) % C
    x = tl.load(x_ptr + offs, mask=mask)
    y = x + tl.load(b_ptr + c, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0), mask=mask)
'''

# NCHW, one program per channel: training-mode BatchNorm (batch mean, biased batch variance), ReLU or not.
BN_TRAIN_KERNEL = '''
@triton.jit
def bn_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, C, HW, eps, RELU: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    count = N * HW
    mask = offs < count
    idx = (offs // HW) * C * HW + c * HW + offs % HW
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / count
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / count
    y = d * tl.rsqrt(var + eps) * tl.load(w_ptr + c) + tl.load(b_ptr + c)
    if RELU:
        y = tl.maximum(y, 0.0)
    tl.store(out_ptr + idx, y, mask=mask)
'''

# NCHW, one program per channel: inference-mode BatchNorm (running statistics) + ReLU.
BN_RUNNING_KERNEL = '''
@triton.jit
def bn_relu_kernel(x_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, out_ptr, N, C, HW, eps, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    count = N * HW
    mask = offs < count
    idx = (offs // HW) * C * HW + c * HW + offs % HW
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    scale = tl.rsqrt(tl.load(rv_ptr + c) + eps) * tl.load(w_ptr + c)
    y = (x - tl.load(rm_ptr + c)) * scale + tl.load(b_ptr + c)
    tl.store(out_ptr + idx, tl.maximum(y, 0.0), mask=mask)
'''

# One program per contiguous row of `cols`: (x - mean) / sqrt(var + eps), biased variance.
ROW_NORM_KERNEL = '''
@triton.jit
def row_norm_kernel(x_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / cols
    tl.store(out_ptr + row * cols + offs, d * tl.rsqrt(var + eps), mask=mask)
'''

# ------------------------------------------------------------------------------------------- references

LINEAR_SCALE_TASK = '''
import torch
import torch.nn as nn

batch_size = 8
in_features = 16
out_features = 24
scale = 2.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
'''


def folded_linear(fold: str) -> str:
    """ModelNew folding the scale into the Linear at construction; `fold` is the statements that do it."""
    return HEADER + MATMUL_NT + ADD_COLUMN_KERNEL + f'''

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
{fold}

    def forward(self, x):
        y = matmul_nt(x, self.linear.weight)
        out = torch.empty_like(y)
        n = y.numel()
        add_column_kernel[(triton.cdiv(n, 256),)](y, self.linear.bias, out, n, y.shape[1], BLOCK=256)
        return out
'''


FOLDED_SCALE = folded_linear("        self.linear.weight.data *= scale\n        self.linear.bias.data *= scale")
# The classic slip: dividing by the scale instead of multiplying.
FOLDED_WRONG_SCALE = folded_linear("        self.linear.weight.data /= scale\n        self.linear.bias.data /= scale")

REDUCED_WEIGHT_TASK = '''
import torch
import torch.nn as nn

batch_size = 4
features = 32
taps = 5


class Model(nn.Module):
    def __init__(self, features, taps):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps, features))

    def forward(self, x):
        return x * self.weight.sum(dim=0)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, taps]
'''

REDUCED_WEIGHT_BUFFER = HEADER + COLUMN_AFFINE_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self, features, taps):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(taps, features))
        self.register_buffer("weight_sum", self.weight.detach().sum(dim=0).clone())

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        column_affine_kernel[(triton.cdiv(n, 128),)](x, self.weight_sum, self.weight_sum, out, n, x.shape[1],
                                                     HAS_SHIFT=False, BLOCK=128)
        return out
'''

CONV_BIAS_TASK = '''
import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 4
height = width = 8
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''


def conv_bias_candidate(init: str) -> str:
    return HEADER + CONV2D + BIAS_RELU_NCHW_KERNEL + f'''

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
{init}

    def forward(self, x):
        y = conv2d(x, self.conv.weight, self.conv.bias)
        out = torch.empty_like(y)
        n = y.numel()
        bias_relu_kernel[(triton.cdiv(n, 256),)](y, {{bias}}, out, n, y.shape[1], y.shape[2] * y.shape[3],
                                                 BLOCK=256)
        return out
'''


# The extra bias is created before the conv: under the same seed the conv's weights differ from the
# reference's, but every name and shape matches, so the copied line-up is right.
REORDERED_PARAMS = conv_bias_candidate(
    "        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1))\n"
    "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)"
).replace("{bias}", "self.bias")
# Reordered and renamed: neither line-up can line the parameters up.
REORDERED_RENAMED_PARAMS = conv_bias_candidate(
    "        self.extra_bias = nn.Parameter(torch.randn(out_channels, 1, 1))\n"
    "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)"
).replace("{bias}", "self.extra_bias")

CONV_BN_TASK = '''
import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 4
height = width = 8
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

_CONV_BN_INIT = '''
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        y = conv2d(x, self.conv.weight, self.conv.bias)
        N, C, H, W = y.shape
        out = torch.empty_like(y)
'''

BN_BATCH_STATS = HEADER + CONV2D + BN_TRAIN_KERNEL + "\n" + _CONV_BN_INIT + '''\
        bn_relu_kernel[(C,)](y, self.bn.weight, self.bn.bias, out, N, C, H * W, self.bn.eps, RELU=True,
                             BLOCK=triton.next_power_of_2(N * H * W))
        return out
'''

# Inference semantics (what `.eval()` would give): wrong for a module left in training mode.
BN_RUNNING_STATS = HEADER + CONV2D + BN_RUNNING_KERNEL + "\n" + _CONV_BN_INIT + '''\
        bn_relu_kernel[(C,)](y, self.bn.weight, self.bn.bias, self.bn.running_mean, self.bn.running_var, out,
                             N, C, H * W, self.bn.eps, BLOCK=triton.next_power_of_2(N * H * W))
        return out
'''

CONV_INSTANCE_NORM_TASK = CONV_BN_TASK.replace("nn.BatchNorm2d(out_channels)", "nn.InstanceNorm2d(out_channels)") \
    .replace("torch.relu(self.bn(self.conv(x)))", "self.norm(self.conv(x))").replace("self.bn =", "self.norm =")

INSTANCE_NORM = HEADER + CONV2D + ROW_NORM_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.norm = nn.InstanceNorm2d(out_channels)

    def forward(self, x):
        y = conv2d(x, self.conv.weight, self.conv.bias)
        N, C, H, W = y.shape
        out = torch.empty_like(y)
        row_norm_kernel[(N * C,)](y, out, H * W, self.norm.eps, BLOCK=triton.next_power_of_2(H * W))
        return out
'''

# InstanceNorm computed with BatchNorm's statistics (over the batch too): wrong.
INSTANCE_NORM_AS_BATCH = HEADER + CONV2D + BN_TRAIN_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.norm = nn.InstanceNorm2d(out_channels)
        self.register_buffer("ones", torch.ones(out_channels))
        self.register_buffer("zeros", torch.zeros(out_channels))

    def forward(self, x):
        y = conv2d(x, self.conv.weight, self.conv.bias)
        N, C, H, W = y.shape
        out = torch.empty_like(y)
        bn_relu_kernel[(C,)](y, self.ones, self.zeros, out, N, C, H * W, self.norm.eps, RELU=False,
                             BLOCK=triton.next_power_of_2(N * H * W))
        return out
'''

# Low-precision tasks: the reference casts its input to `dtype`; its output is in `dtype`.
RMS_TASK = '''
import torch
import torch.nn as nn

rows = 8
cols = 64


class Model(nn.Module):
    def forward(self, x):
        x = x.to(torch.{dtype})
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

# Loads the fp32 input, rounds it as the reference's cast does, computes in fp32, stores `dtype`.
RMS_KERNEL = HEADER + '''
@triton.jit
def rms_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.{dtype}).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / cols
    y = x * tl.rsqrt(ms + 1e-6)
    tl.store(out_ptr + row * cols + offs, y.to(tl.{dtype}), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape, dtype=torch.{dtype}, device=x.device)
        rms_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
'''

AFFINE_TASK = '''
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

# fp32 task, computed in fp16 inside the kernel (stored back as fp32).
AFFINE_IN_FP16 = HEADER + '''
@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    y = x * 2.0 + 1.0
    tl.store(y_ptr + offs, y.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
        return y
'''

# Chained (`height = width = 16`) and tuple (`a, b = 4, 8`) size constants, two inputs, two outputs.
CHAINED_TASK = '''
import torch
import torch.nn as nn

batch_size = 2
channels = 3
height = width = 16
a, b = 4, 8


class Model(nn.Module):
    def forward(self, x, y):
        return torch.relu(x) * 2.0, y * 3.0 - 1.0


def get_inputs():
    return [torch.randn(batch_size, channels, height, width), torch.randn(a, b)]


def get_init_inputs():
    return []
'''
CHAINED_SMALL = {"height": 8, "width": 4, "a": 2, "b": 4}

# Asserts the sizes it is called with, so a size constant the judge failed to apply is a runtime error.
CHAINED_KERNEL = HEADER + '''
@triton.jit
def ew_kernel(x_ptr, out_ptr, n, mul, add, RELU: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if RELU:
        x = tl.maximum(x, 0.0)
    tl.store(out_ptr + offs, x * mul + add, mask=mask)


def ew(x, mul, add, relu):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    ew_kernel[(triton.cdiv(n, 256),)](x, out, n, mul, add, RELU=relu, BLOCK=256)
    return out


class ModelNew(nn.Module):
    def forward(self, x, y):
        assert tuple(x.shape) == EXPECT_X and tuple(y.shape) == EXPECT_Y, (tuple(x.shape), tuple(y.shape))
        return ew(x, 2.0, 0.0, True), ew(y, 3.0, -1.0, False)
'''


def chained_candidate(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> str:
    expect = f"EXPECT_X = {x_shape!r}\nEXPECT_Y = {y_shape!r}\n\n\n"
    return CHAINED_KERNEL.replace("class ModelNew", expect + "class ModelNew")


DROPOUT_TASK = '''
import torch
import torch.nn as nn

batch_size = 4
features = 64


class Model(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(x) * 2.0


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [0.5]
'''

# A Triton "dropout" for DROPOUT_TASK: right in distribution, never equal to one run of the reference.
DROPOUT_CANDIDATE = HEADER + CHAINED_KERNEL.split("class ModelNew")[0].split("import triton.language as tl\n")[1] + '''
class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        keep = (torch.rand_like(x) >= self.p).to(x.dtype)
        return ew(x * keep, 2.0 / (1.0 - self.p), 0.0, False)
'''

# Autotuned, the common ways: a module-level configs list and a key, a heuristic, and a @triton.jit helper
# the kernel calls. The replay (judge/replay/run.py) drops the decorators and launches the config the trial chose.
AUTOTUNED_AFFINE = HEADER + '''
CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]


@triton.jit
def affine(x, scale, shift):
    return x * scale + shift


@triton.autotune(
    configs=CONFIGS,
    key=["n"],
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, affine(x, 2.0, 1.0))
    else:
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, affine(x, 2.0, 1.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        affine_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
'''

# Inline configs on a multi-line decorator, tuned on the row length, a reduction per row.
AUTOTUNED_RMS = HEADER + '''
@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=4)],
                 key=["cols"])
@triton.jit
def rms_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / cols
    tl.store(out_ptr + row * cols + offs, x * tl.rsqrt(ms + 1e-6), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rms_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
'''

# ----------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    id: str
    task: str
    candidate: str
    verdict: str                    # the expected Verdict value
    lineup: str | None = None       # expected Evaluation.lineup when passed
    tolerance_dtype: str = "float32"
    below_precision: bool = False   # expected Evaluation.precision.below_fp32
    small_shapes: dict[str, int] = field(default_factory=dict)
    # extra expectations: "mismatch_copied" (both line-ups mismatched), "verdict_any" (passed or
    # mismatch both acceptable), "skipped_warning" (names not copied are reported)
    checks: tuple[str, ...] = ()
    judge_bug: str | None = None    # set (with the exact failure) when the case is right and the judge is not


LEGITIMATE = [
    Case("folded_scale_in_linear", LINEAR_SCALE_TASK, FOLDED_SCALE, "passed", lineup="same_seed"),
    Case("reduced_weight_buffer", REDUCED_WEIGHT_TASK, REDUCED_WEIGHT_BUFFER, "passed", lineup="same_seed"),
    Case("params_created_in_other_order", CONV_BIAS_TASK, REORDERED_PARAMS, "passed", lineup="copied_by_name"),
    Case("batchnorm2d_training_batch_stats", CONV_BN_TASK, BN_BATCH_STATS, "passed", lineup="same_seed"),
    Case("instancenorm2d", CONV_INSTANCE_NORM_TASK, INSTANCE_NORM, "passed", lineup="same_seed"),
    Case("bf16_task_fp32_compute_bf16_store", RMS_TASK.format(dtype="bfloat16"),
         RMS_KERNEL.replace("{dtype}", "bfloat16"), "passed", lineup="same_seed", tolerance_dtype="bfloat16"),
    Case("fp16_task_fp32_compute_fp16_store", RMS_TASK.format(dtype="float16"),
         RMS_KERNEL.replace("{dtype}", "float16"), "passed", lineup="same_seed", tolerance_dtype="float16"),
    Case("autotuned_heuristic_and_helper", AFFINE_TASK, AUTOTUNED_AFFINE, "passed", lineup="same_seed"),
    Case("autotuned_inline_configs_per_row", RMS_TASK.format(dtype="float32"), AUTOTUNED_RMS, "passed",
         lineup="same_seed"),
]

BREAKERS = [
    Case("batchnorm2d_running_stats_in_training_mode", CONV_BN_TASK, BN_RUNNING_STATS, "mismatch",
         checks=("mismatch_copied",)),
    Case("instancenorm2d_with_batch_stats", CONV_INSTANCE_NORM_TASK, INSTANCE_NORM_AS_BATCH, "mismatch"),
    Case("folded_wrong_scale", LINEAR_SCALE_TASK, FOLDED_WRONG_SCALE, "mismatch", checks=("mismatch_copied",)),
    Case("params_reordered_and_renamed", CONV_BIAS_TASK, REORDERED_RENAMED_PARAMS, "mismatch",
         checks=("mismatch_copied", "skipped_warning")),
    Case("fp32_task_computed_in_fp16", AFFINE_TASK, AFFINE_IN_FP16, "passed", below_precision=True,
         checks=("verdict_any",)),
]
