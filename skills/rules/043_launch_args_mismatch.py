"""Seed rule launch-args-mismatch: Always pass every kernel parameter at launch, with keyword names that exactly match the kernel's parameter names."""

FORMAT = 1
KEY = 'launch-args-mismatch'
TEXT = "Always pass every kernel parameter at launch, with keyword names that exactly match the kernel's parameter names."
SIGNATURES = ['TypeError: <fn>() missing <n> required positional argument: <name>']
ERROR_LINE = "TypeError: add_kernel() missing 1 required positional argument: 'n'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def norm_kernel(inp, out, rows, cols, eps, TILE: tl.constexpr):
    pass


@triton.jit
def inc_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def trigger(device):
    x = torch.randn(64, device=device)
    add_kernel[(1,)](x, 64, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(8, 8, device=device)
    norm_kernel[(8,)](a, a, 8, 8, TILE=8)


def trigger_misspelled_kwarg(device):
    x = torch.randn(64, device=device)
    inc_kernel[(1,)](x, 64, BLOCK=64)
