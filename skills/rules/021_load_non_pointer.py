"""Seed rule load-non-pointer: You cannot tl.load from an integer or float; tl.load takes a pointer (a tensor argument plus offsets)."""

FORMAT = 1
KEY = 'load-non-pointer'
TEXT = 'You cannot tl.load from an integer or float; tl.load takes a pointer (a tensor argument plus offsets).'
SIGNATURES = ['CompilationError: Unsupported ptr type <block> in `tl.load`']
ERROR_LINE = "ValueError: Unsupported ptr type <['64'], int32> in `tl.load`"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def ld_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(n + offs)
    tl.store(x_ptr + offs, v)


def trigger(device):
    x = torch.randn(64, device=device)
    ld_kernel[(1,)](x, 64, BLOCK=64)
