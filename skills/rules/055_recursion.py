"""Seed rule recursion: You cannot call a @triton.jit function recursively; rewrite it as a loop (or tl.static_range for constexpr depth)."""

FORMAT = 1
KEY = 'recursion'
TEXT = 'You cannot call a @triton.jit function recursively; rewrite it as a loop (or tl.static_range for constexpr depth).'
SIGNATURES = ['CompilationError: maximum recursion depth exceeded']
ERROR_LINE = 'RecursionError: maximum recursion depth exceeded'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)


@triton.jit
def scale_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * fact(5))


def trigger(device):
    x = torch.randn(64, device=device)
    scale_kernel[(1,)](x, B=64)
