"""Seed rule reduce-axis-range: Always reduce (tl.sum/tl.max/...) over an axis that exists in the block (0..ndim-1); a scalar has no axis to reduce."""

FORMAT = 1
KEY = 'reduce-axis-range'
TEXT = 'Always reduce (tl.sum/tl.max/...) over an axis that exists in the block (0..ndim-1); a scalar has no axis to reduce.'
SIGNATURES = ['CompilationError: axis <n> out of bounds for shape <shape>', 'CompilationError: invalid axis <n>. Expected <n> <= axis < <n>']
ERROR_LINE = "ValueError: axis 1 out of bounds for shape ['constexpr[64]']"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def sum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(y_ptr, tl.sum(x, axis=1))


@triton.jit
def max_kernel(src, dst, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    t = tl.load(src + r[:, None] * C + c[None, :])
    tl.store(dst + r, tl.max(t, axis=2))


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.empty(1, device=device)
    sum_kernel[(1,)](x, y, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(16, 32, device=device)
    b = torch.empty(16, device=device)
    max_kernel[(1,)](a, b, R=16, C=32)


@triton.jit
def scalar_sum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr)
    tl.store(y_ptr, tl.sum(v, axis=0))


def trigger_scalar(device):
    x = torch.randn(64, device=device)
    y = torch.empty(1, device=device)
    scalar_sum_kernel[(1,)](x, y, BLOCK=64)
