"""Seed rule arange-step: You cannot pass a step to tl.arange; build strided offsets as tl.arange(0, B) * step."""

FORMAT = 1
KEY = 'arange-step'
TEXT = 'You cannot pass a step to tl.arange; build strided offsets as tl.arange(0, B) * step.'
SIGNATURES = ['CompilationError: <fn>() got multiple values for argument <name>']
ERROR_LINE = "TypeError: arange() got multiple values for argument '_semantic'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def even_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B, 2)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    x = torch.randn(64, device=device)
    even_kernel[(1,)](x, B=64)
