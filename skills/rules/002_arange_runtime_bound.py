"""Seed rule arange-runtime-bound: You cannot pass a runtime value, a tensor or a float to tl.arange; its bounds must be tl.constexpr ints (annotate the parameter as tl.constexpr, use // not /)."""

FORMAT = 1
KEY = 'arange-runtime-bound'
TEXT = 'You cannot pass a runtime value, a tensor or a float to tl.arange; its bounds must be tl.constexpr ints (annotate the parameter as tl.constexpr, use // not /).'
SIGNATURES = ["CompilationError: arange's arguments must be of type tl.constexpr"]
ERROR_LINE = "ValueError: arange's arguments must be of type tl.constexpr"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def copy_kernel(x_ptr, y_ptr, n):
    offs = tl.arange(0, n)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def scale_kernel(inp, out, size, BLOCK_SIZE):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    v = tl.load(inp + cols, mask=cols < size)
    tl.store(out + cols, v * 3.0, mask=cols < size)


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.empty_like(x)
    copy_kernel[(1,)](x, y, 64)


def trigger_variant(device):
    x = torch.randn(1000, device=device)
    y = torch.empty_like(x)
    scale_kernel[(4,)](x, y, 1000, 256)


@triton.jit
def tensor_block_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@triton.jit
def half_block_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK / 2)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger_tensor_constexpr(device):
    x = torch.randn(64, device=device)
    tensor_block_kernel[(1,)](x, BLOCK=torch.tensor(64))


def trigger_float_bound(device):
    x = torch.randn(64, device=device)
    half_block_kernel[(1,)](x, BLOCK=64)
