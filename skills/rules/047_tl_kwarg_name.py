"""Seed rule tl-kwarg-name: Always use tl's own keyword names: tl.sum/tl.max/tl.min take axis=, not torch's dim= (likewise keepdim=, out=)."""

FORMAT = 1
KEY = 'tl-kwarg-name'
TEXT = "Always use tl's own keyword names: tl.sum/tl.max/tl.min take axis=, not torch's dim= (likewise keepdim=, out=)."
SIGNATURES = ['CompilationError: <fn>() got an unexpected keyword argument <name>']
ERROR_LINE = "TypeError: sum() got an unexpected keyword argument 'dim'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def row_sum_kernel(x_ptr, y_ptr, B: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, B))
    tl.store(y_ptr, tl.sum(x, dim=0))


@triton.jit
def row_max_kernel(src, dst, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    t = tl.load(src + r[:, None] * C + c[None, :])
    tl.store(dst + r, tl.max(t, dim=1))


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.empty(1, device=device)
    row_sum_kernel[(1,)](x, y, B=64)


def trigger_variant(device):
    a = torch.randn(16, 32, device=device)
    b = torch.empty(16, device=device)
    row_max_kernel[(1,)](a, b, R=16, C=32)
