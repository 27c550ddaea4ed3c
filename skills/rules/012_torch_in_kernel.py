"""Seed rule torch-in-kernel: You cannot call torch functions inside a @triton.jit kernel; use the tl.* equivalents (tl.exp, tl.maximum, ...)."""

FORMAT = 1
KEY = 'torch-in-kernel'
TEXT = 'You cannot call torch functions inside a @triton.jit kernel; use the tl.* equivalents (tl.exp, tl.maximum, ...).'
SIGNATURES = ['CompilationError: <fn>(): argument <name> (position <n>) must be Tensor, not tensor']
ERROR_LINE = "TypeError: relu(): argument 'input' (position 1) must be Tensor, not tensor"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def act_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = torch.relu(x)
    tl.store(x_ptr + offs, y, mask=offs < n)


@triton.jit
def sig_kernel(inp, out, total, TILE: tl.constexpr):
    j = tl.program_id(0) * TILE + tl.arange(0, TILE)
    v = tl.load(inp + j, mask=j < total)
    tl.store(out + j, torch.sigmoid(v), mask=j < total)


def trigger(device):
    x = torch.randn(64, device=device)
    act_kernel[(1,)](x, 64, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(500, device=device)
    b = torch.empty_like(a)
    sig_kernel[(4,)](a, b, 500, TILE=128)
