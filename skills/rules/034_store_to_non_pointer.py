"""Seed rule store-to-non-pointer: You cannot tl.store into a loaded value or scalar; the first argument must be a pointer block."""

FORMAT = 1
KEY = 'store-to-non-pointer'
TEXT = 'You cannot tl.store into a loaded value or scalar; the first argument must be a pointer block.'
SIGNATURES = ['CompilationError: Unsupported ptr type <block> in `tl.store`']
ERROR_LINE = "ValueError: Unsupported ptr type <['64'], fp32> in `tl.store`"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def st_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    tl.store(v, v * 2.0)


def trigger(device):
    x = torch.randn(64, device=device)
    st_kernel[(1,)](x, BLOCK=64)
