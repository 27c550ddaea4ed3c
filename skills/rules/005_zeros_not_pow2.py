"""Seed rule zeros-not-pow2: Always give tl.zeros/tl.full power-of-2 block dimensions."""

FORMAT = 1
KEY = 'zeros-not-pow2'
TEXT = 'Always give tl.zeros/tl.full power-of-2 block dimensions.'
SIGNATURES = ['CompilationError: Shape element <n> must be a power of <n>']
ERROR_LINE = 'ValueError: Shape element 0 must be a power of 2'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def acc_kernel(x_ptr, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK, 16), dtype=tl.float32)
    tl.store(x_ptr + tl.arange(0, 16), tl.sum(acc, axis=0))


def trigger(device):
    x = torch.randn(16, device=device)
    acc_kernel[(1,)](x, BLOCK=24)
