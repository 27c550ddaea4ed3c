"""Seed rule incompatible-shapes: Always make the block shapes of binary ops, tl.where operands, stored values and masks equal or broadcastable to the pointer block (use [:, None] / [None, :])."""

FORMAT = 1
KEY = 'incompatible-shapes'
TEXT = 'Always make the block shapes of binary ops, tl.where operands, stored values and masks equal or broadcastable to the pointer block (use [:, None] / [None, :]).'
SIGNATURES = ['CompilationError: Cannot make_shape_compatible: incompatible dimensions at index <n>: <n> and <n>']
ERROR_LINE = 'ValueError: Cannot make_shape_compatible: incompatible dimensions at index 0: 64 and 32'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, BA: tl.constexpr, BB: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, BA))
    b = tl.load(y_ptr + tl.arange(0, BB))
    tl.store(x_ptr + tl.arange(0, BA), a + b)


@triton.jit
def mul_kernel(p, q, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    tile = tl.load(p + rows[:, None] * C + cols[None, :])
    w = tl.load(q + rows)
    tl.store(p + rows[:, None] * C + cols[None, :], tile * w[None, :])


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.randn(32, device=device)
    add_kernel[(1,)](x, y, BA=64, BB=32)


def trigger_variant(device):
    p = torch.randn(16, 32, device=device)
    q = torch.randn(16, device=device)
    mul_kernel[(1,)](p, q, R=16, C=32)


@triton.jit
def store_2d_into_1d_kernel(x_ptr, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    tile = tl.load(x_ptr + rows[:, None] * C + cols[None, :])
    tl.store(x_ptr + rows, tile)


@triton.jit
def where_kernel(x_ptr, y_ptr, BA: tl.constexpr, BB: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, BA))
    b = tl.load(y_ptr + tl.arange(0, BB))
    tl.store(x_ptr + tl.arange(0, BA), tl.where(a > 0, a, b))


@triton.jit
def mask_kernel(x_ptr, n, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    ptrs = x_ptr + rows * C
    mask = (rows[:, None] < n) & (cols[None, :] < n)
    tl.store(ptrs, tl.load(ptrs, mask=mask))


def trigger_store(device):
    x = torch.randn(16, 32, device=device)
    store_2d_into_1d_kernel[(1,)](x, R=16, C=32)


def trigger_where(device):
    x = torch.randn(64, device=device)
    y = torch.randn(32, device=device)
    where_kernel[(1,)](x, y, BA=64, BB=32)


def trigger_mask(device):
    x = torch.randn(16, 32, device=device)
    mask_kernel[(1,)](x, 30, R=16, C=32)
