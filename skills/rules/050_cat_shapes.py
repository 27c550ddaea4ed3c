"""Seed rule cat-shapes: Always give tl.cat two blocks of the same shape; for other layouts store the parts through separate pointer offsets."""

FORMAT = 1
KEY = 'cat-shapes'
TEXT = 'Always give tl.cat two blocks of the same shape; for other layouts store the parts through separate pointer offsets.'
SIGNATURES = ['CompilationError: tl.cat requires tensors of the same shape, got [<n>] and [<n>]']
ERROR_LINE = 'AssertionError: tl.cat requires tensors of the same shape, got [64] and [32]'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def cat_kernel(x_ptr, B: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, B))
    b = tl.load(x_ptr + tl.arange(0, B // 2))
    c = tl.cat(a, b)
    tl.store(x_ptr + tl.arange(0, B), tl.sum(c) + a)


def trigger(device):
    x = torch.randn(64, device=device)
    cat_kernel[(1,)](x, B=64)
