"""Seed rule len-of-block: You cannot call len() on a block inside a kernel; use the tl.constexpr block size (or x.shape[0])."""

FORMAT = 1
KEY = 'len-of-block'
TEXT = 'You cannot call len() on a block inside a kernel; use the tl.constexpr block size (or x.shape[0]).'
SIGNATURES = ["CompilationError: object of type 'tensor' has no <fn>()"]
ERROR_LINE = "TypeError: object of type 'tensor' has no len()"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def mean_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    a = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, a / len(a))


def trigger(device):
    x = torch.randn(64, device=device)
    mean_kernel[(1,)](x, B=64)
