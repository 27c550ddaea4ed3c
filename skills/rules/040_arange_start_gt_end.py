"""Seed rule arange-start-gt-end: Always call tl.arange(start, end) with end > start."""

FORMAT = 1
KEY = 'arange-start-gt-end'
TEXT = 'Always call tl.arange(start, end) with end > start.'
SIGNATURES = ["CompilationError: arange's end argument must be greater than the start argument"]
ERROR_LINE = "ValueError: arange's end argument must be greater than the start argument"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def a_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(BLOCK, 0)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    x = torch.randn(64, device=device)
    a_kernel[(1,)](x, BLOCK=64)
