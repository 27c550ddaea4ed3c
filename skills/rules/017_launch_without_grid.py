"""Seed rule launch-without-grid: Always launch a kernel as kernel[grid](...); calling kernel(...) directly is an error."""

FORMAT = 1
KEY = 'launch-without-grid'
TEXT = 'Always launch a kernel as kernel[grid](...); calling kernel(...) directly is an error.'
SIGNATURES = ["RuntimeError: Cannot call @triton.jit'd outside of the scope of a kernel"]
ERROR_LINE = "RuntimeError: Cannot call @triton.jit'd outside of the scope of a kernel"
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def trigger(device):
    x = torch.randn(64, device=device)
    add_kernel(x, BLOCK=64)
