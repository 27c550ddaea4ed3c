"""Seed rule math-in-kernel: You cannot call Python math functions on tensors inside a kernel; use tl.exp, tl.sqrt, tl.log and friends."""

FORMAT = 1
KEY = 'math-in-kernel'
TEXT = 'You cannot call Python math functions on tensors inside a kernel; use tl.exp, tl.sqrt, tl.log and friends.'
SIGNATURES = ['CompilationError: only <n>-dimensional arrays can be converted to Python scalars', 'CompilationError: must be real number, not tensor']
ERROR_LINE = 'TypeError: only 0-dimensional arrays can be converted to Python scalars'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

import math


@triton.jit
def exp_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, math.exp(x))


def trigger(device):
    x = torch.randn(64, device=device)
    exp_kernel[(1,)](x, BLOCK=64)
