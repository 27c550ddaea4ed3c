"""Seed rule dot-1d: Always pass 2D (or 3D batched) blocks to tl.dot; for vectors use tl.sum(a * b)."""

FORMAT = 1
KEY = 'dot-1d'
TEXT = 'Always pass 2D (or 3D batched) blocks to tl.dot; for vectors use tl.sum(a * b).'
SIGNATURES = ['CompilationError: input and other must have equal ranks >= <n>']
ERROR_LINE = 'AssertionError: input and other must have equal ranks >= 2'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    tl.store(c_ptr, tl.dot(a, b))


def trigger(device):
    a = torch.randn(32, device=device)
    b = torch.randn(32, device=device)
    c = torch.empty(1, device=device)
    dot_kernel[(1,)](a, b, c, B=32)
