"""Seed rule other-without-mask: You cannot give tl.load an other= value without a mask=; pass both (mask=offs < n, other=0.0) or neither."""

FORMAT = 1
KEY = 'other-without-mask'
TEXT = 'You cannot give tl.load an other= value without a mask=; pass both (mask=offs < n, other=0.0) or neither.'
SIGNATURES = ["CompilationError: 'other' cannot be provided without 'mask'"]
ERROR_LINE = 'ValueError: `other` cannot be provided without `mask`'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def pad_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, other=0.0))


def trigger(device):
    x = torch.randn(64, device=device)
    pad_kernel[(1,)](x, B=64)
