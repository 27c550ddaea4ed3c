"""Seed rule reshape-numel: Always keep the number of elements when calling tl.reshape/tl.view (the product of the new shape must equal the old one)."""

FORMAT = 1
KEY = 'reshape-numel'
TEXT = 'Always keep the number of elements when calling tl.reshape/tl.view (the product of the new shape must equal the old one).'
SIGNATURES = ['CompilationError: <fn>() cannot change total number of elements in tensor']
ERROR_LINE = 'ValueError: reshape() cannot change total number of elements in tensor'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def rs_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.reshape(x, (BLOCK, 2))
    tl.store(x_ptr + offs, tl.sum(y, axis=1))


def trigger(device):
    x = torch.randn(64, device=device)
    rs_kernel[(1,)](x, BLOCK=64)
