"""Seed rule block-condition: You cannot use a block tensor as an if/while condition; conditions must be scalars (reduce with tl.max/tl.sum, or use tl.where for elementwise choices)."""

FORMAT = 1
KEY = 'block-condition'
TEXT = 'You cannot use a block tensor as an if/while condition; conditions must be scalars (reduce with tl.max/tl.sum, or use tl.where for elementwise choices).'
SIGNATURES = ['CompilationError: Boolean value of Tensor with more than one value is ambiguous']
ERROR_LINE = 'CompilationError: Boolean value of Tensor with more than one value is ambiguous'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def if_kernel(src, T: tl.constexpr):
    j = tl.arange(0, T)
    v = tl.load(src + j)
    if v > 0.5:
        v = v * 2.0
    tl.store(src + j, v)


def trigger(device):
    x = torch.randn(32, device=device)
    if_kernel[(1,)](x, T=32)
